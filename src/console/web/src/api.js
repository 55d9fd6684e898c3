// The public API with the caller's own token: the console shows what that
// token may see and nothing else.
const KEY = 'unisched.token';

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code;
    this.field = e.field;
  }
}

export async function call(method, path, body) {
  const headers = {Authorization: `Bearer ${token()}`};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!response.ok) throw new ApiError(response.status, json);
  return json === null ? text : json;
}

export const get = (path) => call('GET', path);

// GET with the token, the body read as it arrives (a job's log while it runs).
export async function follow(path, onText, signal) {
  const response = await fetch(path, {headers: {Authorization: `Bearer ${token()}`}, signal});
  if (!response.ok) throw new ApiError(response.status, null);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    onText(decoder.decode(value, {stream: true}));
  }
}

// A download that needs the token: fetched, then saved from a blob.
export async function download(path, filename) {
  const response = await fetch(path, {headers: {Authorization: `Bearer ${token()}`}});
  if (!response.ok) throw new ApiError(response.status, null);
  const url = URL.createObjectURL(await response.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  URL.revokeObjectURL(url);
}
