import { PipeTransform } from '@nestjs/common';
import { messageOf, nameProblem } from './contract-validators';
import { contractException } from './dto-validation';

/** Validates a name taken from the path (queue, partition) with the rule IsName applies to names in bodies. */
export class NamePipe implements PipeTransform<unknown, string> {
  constructor(private readonly field: string) {}

  transform(value: unknown): string {
    const problem = nameProblem(value);
    if (problem !== undefined) throw contractException(messageOf(this.field, problem));
    return value as string;
  }
}

/** An optional name in the query string. */
export class OptionalNamePipe implements PipeTransform<unknown, string | undefined> {
  constructor(private readonly field: string) {}

  transform(value: unknown): string | undefined {
    if (value === undefined) return undefined;
    const problem = Array.isArray(value) ? 'must be given once' : nameProblem(value);
    if (problem !== undefined) throw contractException(messageOf(this.field, problem));
    return value as string;
  }
}
