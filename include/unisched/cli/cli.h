#pragma once
// The command-line client: `unisched submit|jobs|job|cancel|hold|release|log|
// events|nodes|queues|pools|whoami|help`. src/daemon/main.cc hands every first
// argument it does not handle itself (server, validate-config) to RunCli.

namespace unisched::cli {

// argv[0] is the program, argv[1] the command. Reads UNISCHED_URL (default
// http://127.0.0.1:8642) and UNISCHED_TOKEN; --url and --token-file override
// them. Returns the process exit status: 0 success, 1 an API or connection
// error (or a waited-for job that did not complete), 2 a usage error.
int RunCli(int argc, char** argv);

}  // namespace unisched::cli
