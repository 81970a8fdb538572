import { PipeTransform } from '@nestjs/common';
import { messageOf, nameProblem } from './contract-validators';
import { contractException } from './dto-validation';

export class NamePipe implements PipeTransform<unknown, string> {
  constructor(private readonly field: string) {}

  transform(value: unknown): string {
    const problem = nameProblem(value);
    if (problem !== undefined) throw contractException(messageOf(this.field, problem));
    return value as string;
  }
}

export class OptionalNamePipe implements PipeTransform<unknown, string | undefined> {
  constructor(private readonly field: string) {}

  transform(value: unknown): string | undefined {
    if (value === undefined) return undefined;
    const problem = Array.isArray(value) ? 'must be given once' : nameProblem(value);
    if (problem !== undefined) throw contractException(messageOf(this.field, problem));
    return value as string;
  }
}
