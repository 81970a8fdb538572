import { ApiErrorResponse } from './api-errors.decorator';

export const ApiDatabaseErrors = (consequence: string) =>
  ApiErrorResponse(
    500,
    'The database could not be reached (`pool`), or did not finish within DB_STATEMENT_TIMEOUT_MS + 1 s ' +
      `(\`database timeout\`). ${consequence} Anything unexpected answers \`internal error\` and is logged with the ` +
      'request id.',
    'pool',
    'database timeout',
    'internal error',
  );
