// The gateway's defaults, where flags, loadConfig and test gateways read them.
export const GATEWAY_DEFAULTS = {
  bindAddress: '0.0.0.0',
  webhookPort: 8443,
  grpcPort: 50051,
  metricsPort: 9090,
  forgetAfterMs: 600_000,
  bodyLimitBytes: 4 * 1024 * 1024,
};
