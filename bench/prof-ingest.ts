import { GATEWAY_NODE_ARGS, startGateway, startSimAgents } from './processes.js';
import { watchProcess } from './proc-stats.js';
GATEWAY_NODE_ARGS.push('--cpu-prof', '--cpu-prof-dir=/tmp/exp/prof-ingest');
const N = Number(process.env.N ?? 10000);
const gw = await startGateway({ agentThread: true });
const sim = startSimAgents(`127.0.0.1:${gw.ports.agent}`, N, 'sim', 'inherit', 19);
await sim.ready;
await new Promise((r) => setTimeout(r, 30000));
const w = watchProcess(gw.pid, 1000);
await new Promise((r) => setTimeout(r, 20000));
const u = w.stop();
console.log(`gateway ${Math.round(u.millicores)} millicores over the window`);
const tasks = (await import('node:fs')).readdirSync(`/proc/${gw.pid}/task`);
for (const t of tasks) { const st = (await import('node:fs')).readFileSync(`/proc/${gw.pid}/task/${t}/stat`, 'utf8'); const name = st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')); const f = st.slice(st.lastIndexOf(')') + 2).split(' '); console.log(`thread ${t} ${name}: ${(Number(f[11]) + Number(f[12])) / 100} s`); }
sim.child.kill('SIGTERM');
await gw.stop();
process.exit(0);
