// A workflow's tasks placed for drawing: one column per depth (the longest
// chain of `after` before a task), tasks of a column one under the other;
// an alternative goes in the column of the task it stands in for.
export function layout(tasks) {
  const byName = Object.fromEntries(tasks.map((task) => [task.name, task]));
  const depth = {};
  const depthOf = (name, seen = new Set()) => {
    if (depth[name] !== undefined) return depth[name];
    const task = byName[name];
    if (!task || seen.has(name)) return 0;
    seen.add(name);
    let d = 0;
    if (task.alternative_for) d = depthOf(task.alternative_for, seen);
    for (const up of task.after || []) d = Math.max(d, depthOf(up, seen) + 1);
    depth[name] = d;
    return d;
  };
  const columns = [];
  for (const task of tasks) {
    const d = depthOf(task.name);
    (columns[d] = columns[d] || []).push(task.name);
  }
  const nodes = [];
  columns.forEach((names, c) => names.forEach((name, r) => nodes.push({name, x: 10 + c * 180, y: 10 + r * 60})));
  const rows = Math.max(1, ...columns.map((names) => (names ? names.length : 0)));
  return {nodes, width: 20 + columns.length * 180, height: 20 + rows * 60};
}
