#!/usr/bin/env node
// oversell: live node usage and what oversell grants, from the gateway's query API.
// Also a kubectl plugin: installed as kubectl-oversell, `kubectl oversell top`.
import * as grpc from '@grpc/grpc-js';
import { dumpYaml } from '@kubernetes/client-node';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { NodeEvent__Output } from '../proto/gen/oversell/v1/NodeEvent.js';
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import type { NodeSummaries__Output } from '../proto/gen/oversell/v1/NodeSummaries.js';
import { connect, ConnectError, explainGrpcError, type ConnectOptions, type Connection } from './connect.js';
import { simulateCommand } from './simulate.js';
import { record } from './record.js';
import { parseDuration } from '../lib/duration.js';
import { renderDescribe, renderPolicies, renderTop, rowOfStatus, rowsOfSummaries, sortNodes, type SortKey, type Style, type TopRow } from './render.js';

const program = new Command(process.argv[1]?.endsWith('kubectl-oversell') ? 'kubectl oversell' : 'oversell')
  .description('Live node usage, raw and granted allocatable, and why, from the oversell gateway.')
  .addOption(new Option('--address <host:port>', 'gateway gRPC address (default: port-forward to the gateway Service of the current kubeconfig)').env('OVERSELL_ADDRESS'))
  .addOption(new Option('--kubeconfig <file>', 'kubeconfig to find the gateway through (default: ~/.kube/config, or in a pod its ServiceAccount; a $KUBECONFIG list is merged)').env('KUBECONFIG'))
  .addOption(new Option('-n, --namespace <ns>', 'namespace of the gateway Service').default('oversell'))
  .addOption(new Option('--service <name>', 'gateway Service').default('oversell-gateway'))
  .addOption(new Option('--ca-file <file>', 'CA of the gateway certificate (default through a kubeconfig: the oversell-gateway-ca ConfigMap)').env('OVERSELL_CA_FILE'))
  .addOption(new Option('--server-name <name>', 'name the gateway certificate is checked against (default: <service>.<namespace>.svc)'))
  .addOption(new Option('--token <token>', 'bearer token for the query API, sent only over TLS (default through a kubeconfig: its user\'s token, exec plugin or OIDC credential; \'\' sends none)').env('OVERSELL_TOKEN'))
  .addOption(new Option('--no-color', 'no colours (also when NO_COLOR is set or output is not a terminal)'))
  .showHelpAfterError();

/** The global flags: where the gateway is (connect's options) and how to print. */
interface Global extends ConnectOptions {
  color: boolean;
}

const style = (): Style => ({ color: program.opts<Global>().color && process.stdout.isTTY === true && !process.env.NO_COLOR });

async function withConnection<T>(fn: (c: Connection) => Promise<T>): Promise<T> {
  const g = program.opts<Global>();
  let c: Connection | undefined;
  try {
    c = await connect(g);
    return await fn(c);
  } catch (err) {
    const e = err as grpc.ServiceError;
    const message = err instanceof ConnectError ? err.message : typeof e.code === 'number' ? explainGrpcError(e, c?.target ?? '?', c?.noToken) : (err as Error).message;
    process.stderr.write(`error: ${message}\n`);
    return process.exit(1);
  } finally {
    c?.close();
  }
}

const deadline = () => ({ deadline: Date.now() + 10_000 });
const unary = <Req, Res>(c: Connection, fn: (req: Req, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown, req: Req) =>
  new Promise<Res>((resolve, reject) => fn(req, c.metadata(), deadline(), (err, res) => (err ? reject(err) : resolve(res as Res))));

function print(value: unknown, output: string, render: () => string): void {
  if (output === 'json') process.stdout.write(JSON.stringify(value, null, 2) + '\n');
  else if (output === 'yaml') process.stdout.write(dumpYaml(value));
  else process.stdout.write(render());
}

const outputOption = () => new Option('-o, --output <format>', 'table, wide, json or yaml').choices(['table', 'wide', 'json', 'yaml']).default('table');

program
  .command('top')
  .description('usage and allocatable per node, like kubectl top nodes')
  .argument('[resource]', '"nodes" (the only resource)', 'nodes')
  .addOption(outputOption())
  .option('-l, --selector <selector>', 'label selector, e.g. pool=batch')
  .option('--policy <name>', 'only nodes governed by this policy')
  .addOption(new Option('--sort-by <key>', 'sort order').choices(['name', 'cpu', 'memory', 'ratio', 'age']).default('name'))
  .option('-w, --watch', 'keep refreshing as the gateway reports changes')
  .action(async (resource: string, o: { output: string; selector?: string; policy?: string; sortBy: SortKey; watch?: boolean }) => {
    if (resource !== 'nodes' && resource !== 'node') {
      process.stderr.write(`error: unknown resource ${JSON.stringify(resource)}; oversell top nodes\n`);
      process.exit(2);
    }
    const req = { labelSelector: o.selector ?? '', policy: o.policy ?? '' };
    const wide = o.output === 'wide';
    const showRows = (rows: TopRow[]) => process.stdout.write(renderTop(sortNodes(rows, o.sortBy), style(), wide));
    // json and yaml print every field of every node: the full view.
    const show = (nodes: NodeStatus__Output[]) => {
      const byName = new Map(nodes.map((n) => [n.name, n]));
      const sorted = sortNodes(nodes.map(rowOfStatus), o.sortBy);
      print({ nodes: sorted.map((r) => byName.get(r.name)) }, o.output, () => renderTop(sorted, style(), wide));
    };
    await withConnection(async (c) => {
      if (!o.watch && (o.output === 'table' || wide)) {
        // The table needs only a few columns: the summary, which at fleet scale costs a fraction of the full list.
        const res = await unary<typeof req, NodeSummaries__Output>(c, c.client.ListNodeSummaries.bind(c.client), req);
        showRows(rowsOfSummaries(res));
        return;
      }
      if (!o.watch) {
        const res = await unary<typeof req, { nodes: NodeStatus__Output[] }>(c, c.client.ListNodes.bind(c.client), req);
        show(res.nodes);
        return;
      }
      await new Promise<void>((resolve, reject) => {
        const nodes = new Map<string, NodeStatus__Output>();
        let synced = false;
        let timer: NodeJS.Timeout | undefined;
        const redraw = () => {
          timer = undefined;
          if (process.stdout.isTTY) process.stdout.write('\x1b[H\x1b[2J'); // in place
          else process.stdout.write('\n');
          show([...nodes.values()]);
        };
        const call = c.client.WatchNodes(req, c.metadata());
        call.on('data', (e: NodeEvent__Output) => {
          if (e.type === 'REMOVED') nodes.delete(e.node?.name ?? '');
          else if (e.node && (e.type === 'SNAPSHOT' || e.type === 'UPDATED')) nodes.set(e.node.name, e.node);
          if (e.type === 'SYNCED') synced = true;
          if (synced && !timer) timer = setTimeout(redraw, 1000); // at most one table a second
        });
        call.on('error', (err: grpc.ServiceError) => (err.code === grpc.status.CANCELLED ? resolve() : reject(err)));
        call.on('end', resolve);
        process.once('SIGINT', () => {
          call.cancel();
          resolve();
        });
      });
    });
  });

program
  .command('describe')
  .description('every input and bound of a node\'s decision, in words')
  .argument('<resource>', '"node"')
  .argument('<name>', 'node name')
  .addOption(outputOption().choices(['table', 'json', 'yaml']))
  .action(async (resource: string, name: string, o: { output: string }) => {
    if (resource !== 'node' && resource !== 'nodes') {
      process.stderr.write(`error: unknown resource ${JSON.stringify(resource)}; oversell describe node <name>\n`);
      process.exit(2);
    }
    await withConnection(async (c) => {
      const node = await unary<{ name: string }, NodeStatus__Output>(c, c.client.GetNode.bind(c.client), { name });
      print(node, o.output, () => renderDescribe(node, style()));
    });
  });

program
  .command('get')
  .description('list objects: "oversell get policies"')
  .argument('<resource>', '"policies"')
  .addOption(outputOption().choices(['table', 'json', 'yaml']))
  .action(async (resource: string, o: { output: string }) => {
    if (!['policies', 'policy', 'oversellpolicies', 'osp'].includes(resource)) {
      process.stderr.write(`error: unknown resource ${JSON.stringify(resource)}; oversell get policies\n`);
      process.exit(2);
    }
    await withConnection(async (c) => {
      const res = await unary<object, { policies: import('../proto/gen/oversell/v1/PolicyInfo.js').PolicyInfo__Output[] }>(c, c.client.ListPolicies.bind(c.client), {});
      print(res, o.output, () => renderPolicies(res.policies, style()));
    });
  });

const duration = (flag: string) => (v: string) => {
  let ms: number;
  try {
    ms = parseDuration(v, flag);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  if (!(ms > 0)) throw new InvalidArgumentError(`${flag} must be above zero`);
  return ms;
};

program
  .command('record')
  .description('record each node\'s usage and bound requests from the gateway into a trace for `oversell simulate --trace`')
  .requiredOption('--out <file>', 'the trace file to write (one JSON object a line)')
  .addOption(new Option('--interval <duration>', 'time between polls').default(10_000, '10s').argParser(duration('--interval')))
  .addOption(new Option('--duration <duration>', 'how long to record').default(3_600_000, '1h').argParser(duration('--duration')))
  .option('-l, --selector <selector>', 'label selector, e.g. pool=batch')
  .action(async (o: { out: string; interval: number; duration: number; selector?: string }) => {
    let stopped = false;
    process.once('SIGINT', () => (stopped = true));
    await withConnection(async (c) => {
      const req = { labelSelector: o.selector ?? '', policy: '' };
      const list = () => unary<typeof req, { nodes: NodeStatus__Output[] }>(c, c.client.ListNodes.bind(c.client), req).then((r) => r.nodes);
      const polls = await record(list, { intervalMs: o.interval, durationMs: o.duration, out: o.out }, (line) => process.stderr.write(`${line}\n`), () => stopped);
      process.stderr.write(`wrote ${o.out}: ${polls} polls; replay it with oversell simulate --trace ${o.out}\n`);
    });
  });

program.addCommand(simulateCommand());

await program.parseAsync();
