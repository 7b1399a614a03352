/**
 * The baseline of `npm run bench:service` (./service-bench.ts): a bare fastify app on loopback,
 * its own process, `GET /hello` → `{"hello":"world"}` and `POST /hello` (JSON body, answered 202
 * with `connection: close`, as the index answers a report). Prints `hello ready at URL`.
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/hello', async () => ({ hello: 'world' }));
app.post('/hello', async (_req, reply) => {
  reply.header('connection', 'close');
  reply.code(202);
  return { accepted: true };
});
const url = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`hello ready at ${url}\n`);
process.on('SIGTERM', () => {
  app.close().then(() => process.exit(0));
});
