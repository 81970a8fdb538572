import { InitialSchema1796031809241 } from '../../migrations/1796031809241-InitialSchema';

/** Listed explicitly so the compiled app, the CLI and jest load the same set. */
export const MIGRATIONS = [InitialSchema1796031809241];
