// Does Node's https agent resume its TLS session with the gateway? Microsoft's Node client for
// this endpoint sends `Connection: close`, so each call is a new TLS connection; Node's agent
// keeps the session of each one (TLS 1.3 ticket or TLS 1.2 session) and offers it on the next.
//
// Usage: node tls_session_reuse.js <config.json>
//   config: {"host", "port", "path", "user", "password", "ca": "<PEM file>", "calls": <n>}
// For TLS 1.3 and TLS 1.2 (agent maxVersion), makes `calls` sequential POSTs of a TJSON
// get_all_databases through one https.Agent with keepAlive false, and prints one JSON object
// {"TLSv1.3": [{"status", "protocol", "reused", "body"}, ...], "TLSv1.2": [...]} on stdout.
'use strict';

const fs = require('fs');
const https = require('https');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const BODY = '[1,"get_all_databases",1,1,{}]';

function post(agent) {
  return new Promise((resolve, reject) => {
    const req = https.request({
      agent, host: config.host, port: config.port, path: config.path, method: 'POST',
      headers: {
        Authorization: `Basic ${Buffer.from(`${config.user}:${config.password}`).toString('base64')}`,
        'Content-Type': 'application/vnd.apache.thrift.json',
        'Content-Length': Buffer.byteLength(BODY),
        Connection: 'close',
      },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({
        status: res.statusCode,
        protocol: res.socket.getProtocol(),
        reused: res.socket.isSessionReused(),
        body: Buffer.concat(chunks).toString('utf8'),
      }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(BODY);
  });
}

async function main() {
  const out = {};
  for (const version of ['TLSv1.3', 'TLSv1.2']) {
    const agent = new https.Agent({ keepAlive: false, ca: fs.readFileSync(config.ca), maxVersion: version });
    out[version] = [];
    for (let i = 0; i < config.calls; i += 1) {
      out[version].push(await post(agent));
    }
    agent.destroy();
  }
  process.stdout.write(JSON.stringify(out));
}

main().then(
  () => process.exit(0),
  (err) => { process.stderr.write(`${err && err.stack ? err.stack : err}\n`); process.exit(1); },
);
