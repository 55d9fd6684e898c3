// The conformance run's daemon config (scripts/api-conformance.sh): the
// default config (argv[2]) plus what some answers need, printed as YAML.
const fs = require('fs');
const yaml = require('js-yaml');
const config = yaml.load(fs.readFileSync(process.argv[2], 'utf8'));
// The agent endpoints need an agent node: a pool of one, with its queue.
config.pools.push({name: 'agent-pool', kind: 'cpu', nodes: ['x86-c4m8-agent-01']});
config.nodes.push({name: 'x86-c4m8-agent-01', cpus: 4, memory_mb: 8192, agent: true});
config.queues.push({name: 'agent-batch', pool: 'agent-pool'});
// A project alice is not a member of (403 on submit).
config.projects.push({name: 'physics'});
// A file over sandboxes.max_file_bytes is 413 (the default is 8 MiB, more
// than a request body may hold).
config.sandboxes = Object.assign({}, config.sandboxes || {}, {max_file_bytes: 65536});
process.stdout.write(yaml.dump(config));
