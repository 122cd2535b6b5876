// Imported first by a worker thread started from source (lib/module-worker.ts):
// registers tsx's module hooks in that thread, so its .ts entry and imports load.
// Plain JavaScript: nothing can load TypeScript before this has run. Never
// part of the built program (tsx is a development dependency).
import { register } from 'tsx/esm/api';

register();
