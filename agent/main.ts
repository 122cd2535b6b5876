#!/usr/bin/env node
// oversell-agent's entry point; the agent is run.ts.
//
// The DaemonSet runs Node with --jitless (and --no-expose-wasm): no WebAssembly. On Node 22
// any ESM import of node:http (the Kubernetes client has one) builds http's ESM facade, which
// reads the lazy getters http.WebSocket, CloseEvent and MessageEvent; they load undici, which
// compiles its HTTP parser as WebAssembly at load, and the process dies ("ReferenceError:
// WebAssembly is not defined"). Node 20 has no such getters. The agent uses none of the three,
// so without WebAssembly they become plain undefined here, through require (which builds no
// facade), before anything imports node:http. scripts/image/check.sh runs the image's agent
// with the DaemonSet's flags.
import { createRequire } from 'node:module';

if (!('WebAssembly' in globalThis)) {
  const http = createRequire(import.meta.url)('node:http') as Record<string, unknown>;
  for (const name of ['WebSocket', 'CloseEvent', 'MessageEvent']) {
    const d = Object.getOwnPropertyDescriptor(http, name);
    if (d?.get && d.configurable) Object.defineProperty(http, name, { value: undefined, writable: true, configurable: true, enumerable: d.enumerable ?? false });
  }
}
await import('./run.js');
