#pragma once
// What the client prints for people: one table printer shared by every list,
// the key: value block of `unisched job`, and error lines. Pure functions of
// the API's JSON, so the tests need no server.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace unisched::cli {

// Columns left-aligned, two spaces apart, a header line first; the last
// column is not padded. Rows shorter than the header are filled with "".
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// A JSON value as a table cell: strings as they are, null and "" as "-",
// lists of scalars comma-joined, objects as k=v,k=v.
std::string CellText(const nlohmann::json& value);

// "pending" -> "PENDING" (ASCII).
std::string Upper(std::string text);

// 5400 -> "01:30:00"; 90061 -> "1-01:01:01" (the form --time accepts).
std::string FormatDuration(int64_t seconds);

// "2026-12-02T13:23:25.123Z" -> "2026-12-02 13:23:25"; null -> "-".
std::string ShortTime(const nlohmann::json& rfc3339);

// An argv as a shell would need it typed: words with spaces or quotes are
// single-quoted.
std::string ShellJoin(const nlohmann::json& argv);

// The line for a failed API call: "error: <message> (field: <field>)" from
// the error body {"error": {code, message, field}}; for bodies of another
// shape, "error: HTTP <status>: <body text>". No trailing newline.
std::string FormatApiError(int status, const std::string& body);

// The lists, from the bodies of GET /v1/jobs, /v1/nodes, /v1/queues,
// /v1/pools and /v1/jobs/{id}/events.
std::string FormatJobsTable(const nlohmann::json& list);
std::string FormatNodesTable(const nlohmann::json& list);
std::string FormatQueuesTable(const nlohmann::json& list);
std::string FormatPoolsTable(const nlohmann::json& list);
std::string FormatEventsTable(const nlohmann::json& list);
// GET /v1/sandboxes as a table.
std::string FormatSandboxesTable(const nlohmann::json& list);

// `unisched job ID`: one "Key: value" line per field, then the attempts and
// the pending reasons each on its own indented line.
std::string FormatJobDetail(const nlohmann::json& job);

// `unisched whoami`.
std::string FormatWhoAmI(const nlohmann::json& who);

// A ledger quantity as a cell: whole numbers without decimals, others with
// at most two (trailing zeros dropped): 8.0 -> "8", 1.0234 -> "1.02"; null
// (a metric not measured) -> "-".
std::string FormatQuantity(const nlohmann::json& value);

// `unisched usage`, from the body of GET /v1/usage: the group columns
// (`group_by` first, in the order asked, then any other non-numeric keys of
// the rows), then one column per metric present in any row, in the
// contract's order (unknown numeric keys last). A metric absent from a row
// is "-", never 0. More than one row adds a TOTAL line; a units note follows.
std::string FormatUsageTable(const nlohmann::json& body, const std::vector<std::string>& group_by);

// `unisched reconcile`, from the body of GET /v1/usage/reconcile: the
// counts, then one line per discrepancy.
std::string FormatReconcile(const nlohmann::json& body);

// missing + duplicated + mismatched of a reconcile body (0: the ledger
// reconciles).
int64_t DiscrepancyCount(const nlohmann::json& body);

}  // namespace unisched::cli

namespace unisched::cli {

// The lines for a call that never got an HTTP answer (HttpClient's
// connection_failed, timeout, transport_error): which URL, what happened and
// how to fix it. No trailing newline.
std::string FormatConnectionError(const std::string& url, const std::string& code, const std::string& message);

// Extra advice printed under an API error line for some statuses (401: how
// to pass a token), or "".
std::string HintForStatus(int status);

}  // namespace unisched::cli
