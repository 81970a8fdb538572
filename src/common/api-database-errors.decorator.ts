import { applyDecorators } from '@nestjs/common';
import { ApiInternalServerErrorResponse } from '@nestjs/swagger';
import { ErrorResponseDto } from './error-response.dto';

/** The 500s every database-backed route shares (docs/failures.md), with what they mean for this route. */
export const ApiDatabaseErrors = (consequence: string) =>
  applyDecorators(
    ApiInternalServerErrorResponse({
      type: ErrorResponseDto,
      description:
        'The database could not be reached (`pool`), or did not finish within DB_STATEMENT_TIMEOUT_MS + 1 s ' +
        `(\`database timeout\`). ${consequence}`,
    }),
  );
