// Two sidecar templates the injection and template tests share: a default
// proxy (init container, volume, downward env) and an opt-in log shipper.
import { parseTemplate } from '../../gateway/inject/sidecar-template.js';

export const proxy = parseTemplate('proxy', {
  default: true,
  containers: [{ name: 'proxy', image: 'envoy:1.30', volumeMounts: [{ name: 'proxy-config', mountPath: '/etc/envoy' }] }],
  initContainers: [{ name: 'proxy-init', image: 'envoy-init:1.30' }],
  volumes: [{ name: 'proxy-config', emptyDir: {} }],
  downwardEnv: { POD_NAME: 'metadata.name', POD_NAMESPACE: 'metadata.namespace', NODE_NAME: 'spec.nodeName' },
});
export const logs = parseTemplate('logs', { containers: [{ name: 'log-shipper', image: 'fluent-bit:3', volumeMounts: [{ name: 'app-logs', mountPath: '/logs' }] }] });
