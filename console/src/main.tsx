import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, ApiError, tokenStore, WhoAmI, whenUnauthorized } from './api';
import { Session, SessionContext, sessionOf } from './components';
import { Overview } from './views/overview';
import { MessagePage } from './views/message';
import { QUEUE_TABS, QueuePage, QueueTab } from './views/queue';
import { SignIn } from './views/sign-in';
import { SystemPage } from './views/system';
import './styles.css';

type Route =
  | { page: 'overview' }
  | { page: 'queue'; queue: string; tab: QueueTab }
  | { page: 'message'; queue: string; partitionId: string; transactionId: string }
  | { page: 'system' };

function routeOf(hash: string): Route {
  const parts = hash
    .replace(/^#\/?/, '')
    .split('/')
    .filter(Boolean)
    .map((part) => {
      try {
        return decodeURIComponent(part);
      } catch {
        return part;
      }
    });
  if (parts[0] === 'system') return { page: 'system' };
  if (parts[0] === 'queues' && parts[1]) {
    if (parts[2] === 'messages' && parts[3] && parts[4]) {
      return { page: 'message', queue: parts[1], partitionId: parts[3], transactionId: parts[4] };
    }
    const tab = (QUEUE_TABS as readonly string[]).includes(parts[2]) ? (parts[2] as QueueTab) : 'consumers';
    return { page: 'queue', queue: parts[1], tab };
  }
  return { page: 'overview' };
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => routeOf(location.hash));
  useEffect(() => {
    const follow = () => setRoute(routeOf(location.hash));
    window.addEventListener('hashchange', follow);
    return () => window.removeEventListener('hashchange', follow);
  }, []);
  return route;
}

type Identity = { state: 'checking' } | { state: 'signed-out'; error?: ApiError } | { state: 'in'; session: Session };

function App() {
  const [identity, setIdentity] = useState<Identity>({ state: 'checking' });
  const route = useRoute();

  const identify = useCallback(async () => {
    const sent = tokenStore.get() !== null;
    try {
      setIdentity({ state: 'in', session: sessionOf(await api<WhoAmI>('GET', '/whoami')) });
    } catch (error) {
      const failure = error instanceof ApiError ? error : new ApiError(0, String(error));
      if (failure.status === 401 || failure.status === 403) tokenStore.clear();
      // A 401 to a caller that sent no token only means auth is on: the form says enough.
      setIdentity({ state: 'signed-out', error: sent || failure.status !== 401 ? failure : undefined });
    }
  }, []);

  useEffect(() => {
    whenUnauthorized((failure) => {
      tokenStore.clear();
      setIdentity({ state: 'signed-out', error: failure });
    });
    void identify();
  }, [identify]);

  if (identity.state === 'checking') return <p class="muted boot">Connecting…</p>;
  if (identity.state === 'signed-out') {
    return (
      <SignIn
        error={identity.error}
        onToken={(token) => {
          tokenStore.set(token);
          void identify();
        }}
      />
    );
  }
  const { session } = identity;
  return (
    <SessionContext.Provider value={session}>
      <a
        class="skip"
        href="#main"
        onClick={(event) => (event.preventDefault(), document.getElementById('main')?.focus())}
      >
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="#/">
          Leasehold
        </a>
        <nav aria-label="Main">
          <a href="#/" aria-current={route.page === 'overview' ? 'page' : undefined}>
            Queues
          </a>
          {session.isAdmin && (
            <a href="#/system" aria-current={route.page === 'system' ? 'page' : undefined}>
              Maintenance
            </a>
          )}
        </nav>
        <div class="who" data-testid="who">
          <span title="Tenant">
            <span class="muted">tenant</span> <code data-testid="tenant">{session.tenant}</code>
          </span>
          <span class="badge" data-testid="roles">
            {session.roles.join(', ') || 'no role'}
          </span>
          {session.subject && <span class="muted">{session.subject}</span>}
          {session.authEnabled && tokenStore.get() && (
            <button
              type="button"
              onClick={() => {
                tokenStore.clear();
                setIdentity({ state: 'signed-out' });
              }}
            >
              Sign out
            </button>
          )}
        </div>
      </header>
      {!session.canRead ? (
        <main id="main">
          <h1>Nothing to show</h1>
          <p>This token may push messages but not read queues. Sign in with a read-only, read-write or admin token.</p>
        </main>
      ) : route.page === 'queue' ? (
        <QueuePage key={route.queue} name={route.queue} tab={route.tab} />
      ) : route.page === 'message' ? (
        <MessagePage {...route} key={`${route.partitionId}/${route.transactionId}`} />
      ) : route.page === 'system' && session.isAdmin ? (
        <SystemPage />
      ) : (
        <Overview />
      )}
    </SessionContext.Provider>
  );
}

render(<App />, document.getElementById('app')!);
