// The gateway's way to the API server for list-watches (lib/list-watch.ts):
// the kubeconfig's server, and per request what client-node would send
// (CA, client certificate, bearer token or exec credential, proxy agent).
import type { RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeConnection } from './list-watch.js';

export function kubeConfigConnection(kubeConfig: KubeConfig): KubeConnection {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig has no current cluster: nothing to watch');
  return {
    server: new URL(server),
    options: async () => {
      const options: RequestOptions = {};
      await kubeConfig.applyToHTTPSOptions(options);
      return options;
    },
  };
}
