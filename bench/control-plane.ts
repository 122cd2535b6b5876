// The local control plane (scripts/cluster/cluster.sh) for the benchmarks
// that need a real API server: used as it is when it runs, else brought up
// (without the real node unless asked), and taken down again only by whoever
// brought it up.
import { cluster } from '../test/e2e/cluster.js';
import { log } from './processes.js';

function running(): boolean {
  try {
    cluster('status');
    return true;
  } catch {
    return false;
  }
}

/** started: this call brought it up; release() takes it down again then, and does nothing otherwise. */
export function useControlPlane(options: { realNode?: boolean } = {}): { started: boolean; release(): void } {
  const started = !running();
  if (started) {
    log(`bringing the local control plane up (scripts/cluster/cluster.sh up, ${options.realNode ? 'with' : 'without'} the real node)`);
    process.env.OVERSELL_REAL_NODE = options.realNode ? '1' : '0';
    cluster('up');
  }
  return {
    started,
    release() {
      if (!started) return;
      log('taking the local control plane down again');
      cluster('down');
    },
  };
}
