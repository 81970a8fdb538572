import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptions } from '@nestjs/swagger';
import { IsIntegerBetween } from './contract-validators';

export type IntegerParameterOptions = Omit<ApiPropertyOptions, 'type' | 'minimum' | 'maximum'> & {
  /** Null is taken as absent rather than refused. */
  nullMeansAbsent?: boolean;
};

/**
 * An integer's range, stated once: the rule that refuses a value outside it and the schema Swagger shows. Optional
 * unless `required: true` is given, as almost every integer a request carries is.
 */
export function IntegerParameter(min: number, max: number, options: IntegerParameterOptions = {}): PropertyDecorator {
  const { nullMeansAbsent, ...schema } = options;
  return applyDecorators(
    ApiProperty({ required: false, ...schema, type: 'integer', minimum: min, maximum: max } as ApiPropertyOptions),
    IsIntegerBetween(min, max, { nullMeansAbsent }),
  );
}
