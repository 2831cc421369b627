// A real OpenID provider for agentrt-proxy's OAuth tests: panva's
// oidc-provider (pinned in package.json), configured for MCP hosts.
//
//     npm ci --ignore-scripts        (once, in this directory)
//     node provider.mjs              (keep its standard input open)
//
// Environment:
//     OIDC_PORT                   port on 127.0.0.1 (default 0: a free one)
//     OIDC_ACCESS_TOKEN_TTL       access token lifetime, seconds (default 300)
//     OIDC_APPROVER_REDIRECT_URIS space-separated redirect URIs: registers the
//                                 confidential client `agentrt-approver`
//                                 (authorization_code, client_secret_basic)
//     OIDC_APPROVER_SECRET        its secret (default `approver-secret`)
//
// Once listening it prints exactly one line on standard output,
//
//     ISSUER http://127.0.0.1:PORT
//
// and nothing else there (oidc-provider's notices and this script's log, one
// line per request, go to standard error). It exits on SIGTERM, SIGINT, and when its standard
// input reaches end of file (so it must be started with an open stdin: a
// pipe from the harness, or a terminal; `< /dev/null` makes it exit at once).
//
// What it serves (oidc-provider's own routes, issuer http://127.0.0.1:PORT):
//   /.well-known/openid-configuration, /.well-known/oauth-authorization-server
//   (RFC 8414, the same metadata), /jwks, /auth, /token, /reg (open dynamic
//   client registration, RFC 7591: public clients allowed), /me, ...
//
// Accounts (sub = the login name; password `<name>-password`):
//   alice  groups ["approvers","staff"], name "Alice Example", alice@example.test
//   bob    groups ["staff"]
//   carol  groups ["approvers"]
// An unknown name or a wrong password fails the login (the form is shown
// again with status 401 and the text "invalid login or password").
//
// Interactions (no devInteractions): GET /interaction/UID shows a plain form
// (`login`, `password`, posted to /interaction/UID/login) for the login
// prompt; the consent prompt is a real interaction step that is granted
// automatically: GET /interaction/UID for it grants every requested scope,
// claim and resource and answers 303 back to the authorization endpoint.
//
// Access tokens: for a resource indicator (RFC 8707) that is an
// http://127.0.0.1:PORT/... or http://localhost:PORT/... URL, a JWT (typ
// at+jwt) signed ES256 with aud = exactly that URL, carrying sub, iss, aud,
// exp, iat, jti, scope, client_id and, for users, groups. The only resource
// scope is `mcp:tools`. PKCE (S256 only) is required of public clients
// (oidc-provider's default; optional for confidential ones). No refresh
// tokens are issued. A token request without `resource` gets an opaque token
// (not a JWT): always send the resource.
//
// Client credentials: the static client `agentrt-test` (secret `test-secret`,
// client_secret_basic) mints such a token with sub = `agentrt-test` and no
// groups:
//   curl -u agentrt-test:test-secret -d grant_type=client_credentials \
//        -d resource=http://127.0.0.1:9999/mcp -d scope=mcp:tools ISSUER/token
//
// Signing keys (ES256, RS256) and cookie keys are generated at each start;
// all state is in memory.

import { randomBytes, timingSafeEqual, createHash } from 'node:crypto';
import * as http from 'node:http';

// oidc-provider prints its notices with console.info (standard output):
// everything but the ISSUER line goes to standard error.
for (const name of ['log', 'info', 'debug']) {
  console[name] = (...args) => console.error(...args);
}

const { default: Provider, errors } = await import('oidc-provider');
const { generateKeyPair, exportJWK } = await import('jose');

function fail(message) {
  console.error(`provider.mjs: ${message}`);
  process.exit(2);
}

function intFromEnv(name, fallback, min) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min) fail(`${name} must be an integer >= ${min}, not ${JSON.stringify(raw)}`);
  return Number(raw);
}

const port = intFromEnv('OIDC_PORT', 0, 0);
if (port > 65535) fail('OIDC_PORT must be at most 65535');
const accessTokenTTL = intFromEnv('OIDC_ACCESS_TOKEN_TTL', 300, 1);
const approverRedirectUris = (process.env.OIDC_APPROVER_REDIRECT_URIS ?? '').split(/\s+/).filter(Boolean);
const approverSecret = process.env.OIDC_APPROVER_SECRET || 'approver-secret';

const RESOURCE_SCOPE = 'mcp:tools';
// A resource indicator this provider issues tokens for.
const RESOURCE = /^http:\/\/(127\.0\.0\.1|localhost):\d{1,5}(\/[^?#]*)?$/;

const ACCOUNTS = {
  alice: { groups: ['approvers', 'staff'], name: 'Alice Example', email: 'alice@example.test' },
  bob: { groups: ['staff'] },
  carol: { groups: ['approvers'] },
};

function digest(text) {
  return createHash('sha256').update(text, 'utf8').digest();
}

// The account a login name and password sign in, or undefined.
function checkPassword(login, password) {
  if (typeof login !== 'string' || typeof password !== 'string') return undefined;
  if (!Object.hasOwn(ACCOUNTS, login)) return undefined;
  return timingSafeEqual(digest(password), digest(`${login}-password`)) ? login : undefined;
}

async function findAccount(_ctx, sub) {
  if (!Object.hasOwn(ACCOUNTS, sub)) return undefined;
  const account = ACCOUNTS[sub];
  return {
    accountId: sub,
    async claims() {
      return {
        sub,
        groups: account.groups,
        ...(account.name ? { name: account.name } : {}),
        ...(account.email ? { email: account.email, email_verified: true } : {}),
      };
    },
  };
}

async function signingKeys() {
  const keys = [];
  for (const alg of ['ES256', 'RS256']) {
    const { privateKey } = await generateKeyPair(alg, { extractable: true });
    const jwk = await exportJWK(privateKey);
    keys.push({ ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-${randomBytes(6).toString('hex')}` });
  }
  return keys;
}

const clients = [
  {
    client_id: 'agentrt-test',
    client_secret: 'test-secret',
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope: RESOURCE_SCOPE,
  },
];
if (approverRedirectUris.length) {
  clients.push({
    client_id: 'agentrt-approver',
    client_secret: approverSecret,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: approverRedirectUris,
    token_endpoint_auth_method: 'client_secret_basic',
  });
}

// The server first, so that the issuer names the port really bound.
let handler = (_req, res) => {
  res.statusCode = 503;
  res.end();
};
const server = http.createServer((req, res) => handler(req, res));
await new Promise((resolve) => {
  server.once('error', (e) => fail(`cannot listen on 127.0.0.1:${port}: ${e.message}`));
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients,
  findAccount,
  jwks: { keys: await signingKeys() },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  scopes: ['openid', 'offline_access', RESOURCE_SCOPE],
  responseTypes: ['code'],
  // ID tokens carry the claims of the granted scopes (profile, email, groups)
  // even when an access token for userinfo is issued too.
  conformIdTokenClaims: false,
  claims: {
    openid: ['sub'],
    profile: ['name'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // No refresh tokens (the MCP SDK asks for offline_access all the same);
  // a non-default function keeps the refresh_token grant type registrable.
  issueRefreshToken: async () => false,
  clientBasedCORS: () => false,
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true, initialAccessToken: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      async getResourceServerInfo(_ctx, resourceIndicator) {
        if (!RESOURCE.test(resourceIndicator)) throw new errors.InvalidTarget();
        return {
          scope: RESOURCE_SCOPE,
          audience: resourceIndicator,
          accessTokenTTL,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
  async extraTokenClaims(_ctx, token) {
    if (token.accountId && Object.hasOwn(ACCOUNTS, token.accountId)) {
      return { groups: ACCOUNTS[token.accountId].groups };
    }
    return undefined;
  },
  ttl: {
    AccessToken: () => accessTokenTTL,
    ClientCredentials: () => accessTokenTTL,
    AuthorizationCode: () => 60,
    IdToken: () => 3600,
    RefreshToken: () => 24 * 3600,
    Interaction: () => 3600,
    Session: () => 24 * 3600,
    Grant: () => 24 * 3600,
  },
  renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', Object.entries(out).map(([k, v]) => `<p>${k}: ${escape(v)}</p>`).join(''));
  },
});

function escape(value) {
  return String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title, body) {
  return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${escape(title)}</title></head>`
    + `<body><h1>${escape(title)}</h1>${body}</body></html>`;
}

function loginForm(uid, message) {
  return page('Sign-in', `${message ? `<p class="error">${escape(message)}</p>` : ''}`
    + `<form method="post" action="/interaction/${escape(uid)}/login">`
    + '<label>Login <input name="login" autocomplete="username" autofocus></label>'
    + '<label>Password <input name="password" type="password" autocomplete="current-password"></label>'
    + '<button type="submit">Sign in</button></form>');
}

async function readForm(req) {
  let size = 0;
  const chunks = [];
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 64 * 1024) throw new errors.InvalidRequest('form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// Grants everything the consent prompt found missing (as devInteractions do).
async function grantConsent(ctx, details) {
  const { prompt, grantId, session, params } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  if (missing.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  return { consent: { grantId: await grant.save() } };
}

async function finish(ctx, result, merge) {
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: merge });
  ctx.status = 303;
  ctx.redirect(returnTo);
}

// One line per request on standard error, for a test's diagnostics.
provider.use(async (ctx, next) => {
  try {
    await next();
  } finally {
    console.error(`${ctx.method} ${ctx.path} -> ${ctx.status}`);
  }
});

const INTERACTION = /^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/;

provider.use(async (ctx, next) => {
  const match = INTERACTION.exec(ctx.path);
  if (!match) return next();
  ctx.set('Cache-Control', 'no-store');
  const [, uid, login] = match;
  let details;
  try {
    details = await provider.interactionDetails(ctx.req, ctx.res);
  } catch (e) {
    ctx.status = 400;
    ctx.type = 'html';
    ctx.body = page('Sign-in', `<p class="error">${escape(e.error_description || e.message)}</p>`);
    return undefined;
  }
  if (details.uid !== uid) {
    ctx.status = 400;
    ctx.type = 'html';
    ctx.body = page('Sign-in', '<p class="error">interaction mismatch</p>');
    return undefined;
  }
  const promptName = details.prompt.name;
  if (!login && ctx.method === 'GET') {
    if (promptName === 'login') {
      ctx.type = 'html';
      ctx.body = loginForm(uid);
      return undefined;
    }
    if (promptName === 'consent') {
      console.error(`consent granted automatically: client ${details.params.client_id}, account ${details.session?.accountId}`);
      return finish(ctx, await grantConsent(ctx, details), true);
    }
    ctx.throw(501, `prompt ${promptName} is not implemented`);
  }
  if (login && ctx.method === 'POST' && promptName === 'login') {
    const form = await readForm(ctx.req);
    const accountId = checkPassword(form.get('login'), form.get('password'));
    if (!accountId) {
      console.error(`login failed for ${JSON.stringify(form.get('login'))}`);
      ctx.status = 401;
      ctx.type = 'html';
      ctx.body = loginForm(uid, 'invalid login or password');
      return undefined;
    }
    console.error(`login: ${accountId}`);
    return finish(ctx, { login: { accountId } }, false);
  }
  ctx.status = 405;
  ctx.type = 'html';
  ctx.body = page('Sign-in', '<p class="error">unexpected request for this interaction</p>');
  return undefined;
});

provider.on('server_error', (_ctx, error) => console.error('server_error', error));

handler = provider.callback();

let stopping = false;
function stop(why) {
  if (stopping) return;
  stopping = true;
  console.error(`provider.mjs: ${why}; exiting`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
process.stdin.on('end', () => stop('standard input closed'));
process.stdin.on('error', () => stop('standard input failed'));
process.stdin.resume();

process.stdout.write(`ISSUER ${issuer}\n`);
