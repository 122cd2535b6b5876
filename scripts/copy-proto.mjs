// tsc copies no .proto files; the runtime loader reads them next to dist/proto/load.js.
import { cpSync } from 'node:fs';
cpSync('proto/oversell', 'dist/proto/oversell', { recursive: true });
