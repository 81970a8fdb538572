import { PipeTransform } from '@nestjs/common';
import { requireName } from './input';

/** Validates a name taken from the path (queue, partition) with the same rule as names in bodies. */
export class NamePipe implements PipeTransform<unknown, string> {
  constructor(private readonly field: string) {}

  transform(value: unknown): string {
    return requireName(value, this.field);
  }
}
