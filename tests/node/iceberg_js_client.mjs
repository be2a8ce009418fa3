// iceberg-js (npm) against the gateway's iceberg-rest service, with its `warehouse` option: the
// catalog answers `prefix` from /v1/config?warehouse=..., and every call goes below it.
// OAuth2 client credentials first (iceberg-js takes a bearer token; it has no token flow).
//
// Usage: NODE_EXTRA_CA_CERTS=<ca.pem> node iceberg_js_client.mjs <config.json>
//   config: {"uri", "warehouse", "user", "password", "namespace"}
// Prints one JSON object: what each step saw (run by tests/integration/test_iceberg_engines.py).
import fs from 'node:fs';
import { IcebergRestCatalog } from 'iceberg-js';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const out = {};

const form = new URLSearchParams({
  grant_type: 'client_credentials', client_id: config.user, client_secret: config.password, scope: 'catalog',
});
const tokenResponse = await fetch(`${config.uri}/v1/oauth/tokens`, { method: 'POST', body: form });
const token = await tokenResponse.json();
out.token_type = token.token_type;

const catalog = new IcebergRestCatalog({
  baseUrl: config.uri, warehouse: config.warehouse, auth: { type: 'bearer', token: token.access_token },
});
const ns = { namespace: [config.namespace] };
const id = { namespace: [config.namespace], name: 'events' };

out.prefix = (await catalog.loadConfig()).overrides.prefix;
await catalog.createNamespace(ns, { properties: { owner: 'iceberg-js' } });
out.namespaces = (await catalog.listNamespaces()).namespaces.map((n) => n.namespace.join('.'));
out.properties = (await catalog.loadNamespaceMetadata(ns)).properties.owner;
const created = await catalog.createTable(ns, {
  name: 'events',
  schema: { type: 'struct', fields: [{ id: 1, name: 'id', type: 'long', required: false },
                                     { id: 2, name: 'kind', type: 'string', required: false }] },
});
out.created_format_version = created['format-version'];
const listed = await catalog.listTables(ns);
out.tables = listed.identifiers.map((t) => t.name);
out.next_page_token = listed.nextPageToken ?? null;
const loaded = await catalog.loadTableResult(id);
out.not_modified = (await catalog.loadTableResult(id, { ifNoneMatch: loaded.etag })) === null;
const uuid = loaded.metadata['table-uuid'];
const committed = await catalog.updateTable(id, {
  requirements: [{ type: 'assert-table-uuid', uuid }],
  updates: [{ action: 'set-properties', updates: { 'comment': 'from iceberg-js' } }],
});
out.committed_property = committed.metadata.properties.comment;
try {
  await catalog.updateTable(id, {
    requirements: [{ type: 'assert-table-uuid', uuid: '00000000-0000-0000-0000-000000000000' }],
    updates: [{ action: 'set-properties', updates: { 'comment': 'lost' } }],
  });
  out.conflict = null;
} catch (error) {
  out.conflict = { status: error.status, type: error.icebergType };
}
await catalog.dropTable(id, { purge: true });
out.exists_after_drop = await catalog.tableExists(id);
await catalog.dropNamespace(ns);
console.log(JSON.stringify(out));
