#!/usr/bin/env node
// One-shot take-over and give-back of the APIService v1beta1.metrics.k8s.io
// (apiservice-handover.ts). The Helm chart's hooks run it from the oversell
// image; by hand, from a checkout:
//   node --import tsx gateway/act/apiservice-handover-main.ts give-back --saved oversell/oversell-metrics-api-previous
import { KubeConfig, type V1APIService } from '@kubernetes/client-node';
import { Command, InvalidArgumentError, Option } from 'commander';
import { ApiServiceHandover, type Saved } from './apiservice-handover.js';

const savedRef = (v: string): Saved => {
  const [namespace, name, ...rest] = v.split('/');
  if (!namespace || !name || rest.length > 0) throw new InvalidArgumentError('namespace/name of the ConfigMap, e.g. oversell/oversell-metrics-api-previous');
  return { namespace, name };
};
const apiService = (v: string): V1APIService => {
  try {
    return JSON.parse(v) as V1APIService;
  } catch (err) {
    throw new InvalidArgumentError(`not JSON: ${(err as Error).message}`);
  }
};
const savedOption = () => new Option('--saved <namespace/name>', 'the ConfigMap that keeps the APIService taken over').argParser(savedRef).makeOptionMandatory();
const kubeConfigOption = () => new Option('--kubeconfig <file>', 'kubeconfig (default: in a pod its ServiceAccount, else ~/.kube/config)').env('KUBECONFIG');

function kubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc;
}

async function run(what: string, fn: () => Promise<string>): Promise<void> {
  try {
    process.stdout.write(`${what}: ${await fn()}\n`);
  } catch (err) {
    const e = err as { message?: string; body?: unknown };
    process.stderr.write(`${what} failed: ${e.message ?? String(err)}${e.body ? ` (${typeof e.body === 'string' ? e.body : JSON.stringify(e.body)})` : ''}\n`);
    process.exit(1);
  }
}

const program = new Command('apiservice-handover').description('Take over and give back the APIService v1beta1.metrics.k8s.io (docs/install.md, "The metrics API").');
program
  .command('take-over')
  .description('save a foreign APIService v1beta1.metrics.k8s.io in --saved, then put --apiservice (ours) in its place')
  .addOption(new Option('--apiservice <json>', 'the APIService to install, labelled app.kubernetes.io/part-of=oversell').argParser(apiService).makeOptionMandatory())
  .addOption(savedOption())
  .addOption(kubeConfigOption())
  .action((o: { apiservice: V1APIService; saved: Saved; kubeconfig?: string }) => run('take-over', () => new ApiServiceHandover(kubeConfig(o.kubeconfig), o.saved).takeOver(o.apiservice)));
program
  .command('give-back')
  .description('put the APIService saved in --saved back in place of ours and delete the ConfigMap; with none saved, remove ours')
  .addOption(savedOption())
  .addOption(kubeConfigOption())
  .action((o: { saved: Saved; kubeconfig?: string }) =>
    run('give-back', async () => {
      const { result, detail } = await new ApiServiceHandover(kubeConfig(o.kubeconfig), o.saved).giveBack();
      // A refusal fails the Job (Helm keeps a failed hook Job for its logs): the operator must decide.
      if (detail) {
        process.stderr.write(`give-back: ${detail}\n`);
        process.exitCode = 3;
      }
      return result;
    }),
  );
await program.parseAsync(process.argv);
