// The key every replica signs its grants with (decide/grant-proof.ts). In a
// cluster it lives in a Secret of the gateway's namespace, made by whichever
// replica starts first; locally, in a file beside the self-managed CA.
//
// Losing or changing the key costs nothing but a moment of caution: records
// signed with another key are not trusted, and each node's next kubelet write
// establishes raw again.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

const KEY_BYTES = 32;
const DATA_KEY = 'key';

function decodeKey(text: string, where: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length < KEY_BYTES) throw new Error(`${where} holds ${key.length} bytes of key; it needs at least ${KEY_BYTES} (base64). Delete it and the gateway makes a new one.`);
  return key;
}

/** Reads the key file, creating it (mode 0600) when absent. */
export function fileProofKey(path: string): Buffer {
  if (existsSync(path)) return decodeKey(readFileSync(path, 'utf8'), path);
  mkdirSync(dirname(path), { recursive: true });
  const key = randomBytes(KEY_BYTES);
  // wx: two gateways starting at once must not both write; the loser reads the winner's key.
  try {
    writeFileSync(path, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return decodeKey(readFileSync(path, 'utf8'), path);
    throw err;
  }
  chmodSync(path, 0o600);
  return key;
}

const statusOf = (err: unknown): number | undefined => {
  const e = err as { code?: number; statusCode?: number; response?: { statusCode?: number } };
  return e.code ?? e.statusCode ?? e.response?.statusCode;
};

/** Reads the key Secret, creating it when absent; a replica that loses the race reads the winner's. */
export async function secretProofKey(kubeConfig: KubeConfig, namespace: string, name: string): Promise<Buffer> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const where = `Secret ${namespace}/${name} (data.${DATA_KEY})`;
  const read = async (): Promise<Buffer | undefined> => {
    try {
      const secret = await core.readNamespacedSecret({ namespace, name });
      const data = secret.data?.[DATA_KEY];
      if (!data) throw new Error(`${where} is missing; delete the Secret and the gateway makes a new one`);
      return decodeKey(Buffer.from(data, 'base64').toString('utf8'), where);
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  };
  const existing = await read();
  if (existing) return existing;
  const key = randomBytes(KEY_BYTES);
  try {
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name, labels: { 'app.kubernetes.io/part-of': 'oversell' } },
        type: 'Opaque',
        data: { [DATA_KEY]: Buffer.from(key.toString('base64')).toString('base64') },
      },
    });
    return key;
  } catch (err) {
    if (statusOf(err) !== 409) throw err;
    const winner = await read();
    if (!winner) throw new Error(`${where} was created by another replica but cannot be read back`);
    return winner;
  }
}
