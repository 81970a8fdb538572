import { useState } from 'preact/hooks';
import { ApiError } from '../api';
import { Problem } from '../components';

/** The token goes to session storage through this form only: never a URL, never local storage. */
export function SignIn(props: { error: ApiError | undefined; onToken: (token: string) => void }) {
  const [token, setToken] = useState('');
  return (
    <main id="main" class="sign-in">
      <h1>Sign in to Leasehold</h1>
      <p>
        Paste a bearer token for your tenant. It is kept in this tab's session storage until you sign out or close the
        tab.
      </p>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          const value = token.trim().replace(/^Bearer\s+/i, '');
          if (value) props.onToken(value);
        }}
      >
        <label for="token">Token</label>
        <textarea
          id="token"
          name="token"
          rows={4}
          autocomplete="off"
          spellcheck={false}
          value={token}
          onInput={(event) => setToken(event.currentTarget.value)}
          placeholder="eyJhbGciOi…"
          required
        />
        <Problem error={props.error} />
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
      <p class="muted">
        Mint one with <code>npm run token -- --role read-only --tenant &lt;uuid&gt;</code>.
      </p>
    </main>
  );
}
