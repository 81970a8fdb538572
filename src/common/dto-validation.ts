import { BadRequestException, HttpException, PayloadTooLargeException, PipeTransform } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import type { ValidationArguments, ValidatorConstraintInterface } from 'class-validator';
import { Allow } from 'class-validator/cjs/decorator/common/Allow';
import { getMetadataStorage } from 'class-validator/cjs/metadata/MetadataStorage';
import { ValidationTypes } from 'class-validator/cjs/validation/ValidationTypes';
import { Validator } from 'class-validator/cjs/validation/Validator';
import {
  contractRule,
  isPlainObject,
  isTooLargeMessage,
  Problem,
  ValidationLimits,
  withValidationLimits,
} from './contract-validators';
import { isStorableBody } from '../http/request-body';
import { unknownKeysOf, unknownKeysText } from './unknown-keys';

type DtoClass<T = object> = new () => T;

export function contractException(message: string): HttpException {
  return isTooLargeMessage(message)
    ? new PayloadTooLargeException({ error: message })
    : new BadRequestException({ error: message });
}

const declared = new WeakMap<DtoClass, string[]>();

export function declaredProperties(type: DtoClass): string[] {
  let properties = declared.get(type);
  if (!properties) {
    const metadatas = getMetadataStorage().getTargetValidationMetadatas(type, '', true, false);
    properties = [...new Set(metadatas.map((metadata) => metadata.propertyName))];
    declared.set(type, properties);
  }
  return properties;
}

/** A key the DTO takes without a rule of its own (a discriminator, a list the pipe reads itself). */
export const AcceptsKey = (): PropertyDecorator => Allow();

const ignoredKeys = new WeakMap<object, readonly string[]>();

/** Keys a request may carry that the broker does not read (what Queen's clients send and Leasehold has no use for). */
export function IgnoresKeys(...keys: string[]): ClassDecorator {
  return (target) => {
    ignoredKeys.set(target, keys);
  };
}

/** Inherited along the class chain, as the properties are. */
export function ignoredKeysOf(type: DtoClass): string[] {
  const keys: string[] = [];
  let klass: object | null = type;
  while (klass !== null && klass !== Function.prototype) {
    keys.push(...(ignoredKeys.get(klass) ?? []));
    klass = Object.getPrototypeOf(klass) as object | null;
  }
  return keys;
}

interface KeyRules {
  accepted: ReadonlySet<string>;
  /** What a misspelt key is matched against: the keys the broker reads. */
  read: readonly string[];
}

const keyRules = new WeakMap<DtoClass, KeyRules>();

function keyRulesOf(type: DtoClass): KeyRules {
  let rules = keyRules.get(type);
  if (!rules) {
    const read = declaredProperties(type);
    rules = { accepted: new Set([...read, ...ignoredKeysOf(type)]), read };
    keyRules.set(type, rules);
  }
  return rules;
}

/** A key the DTO neither declares nor ignores is refused by name: a typo must not leave a setting silently unset. */
export function unknownKeysProblem(type: DtoClass, plain: object, noun = 'key'): string | undefined {
  const { accepted, read } = keyRulesOf(type);
  const unknown = unknownKeysOf(plain, accepted);
  return unknown && unknownKeysText(unknown, read, noun);
}

const validator = new Validator();

/** The first failing rule's message, by the compiled check when the DTO has only contract rules. */
export function firstMessage(instance: object): string | undefined {
  const check = compiledCheckOf(instance.constructor as DtoClass);
  return check ? check(instance as Record<string, unknown>) : classValidatorMessage(instance);
}

/** What class-validator itself answers; the compiled checks are held to it. */
export function classValidatorMessage(instance: object): string | undefined {
  const [error] = validator.validateSync(instance, {
    // A DTO may declare no rule at all (NoQueryParameters): its keys were checked already.
    forbidUnknownValues: false,
    stopAtFirstError: true,
    validationError: { target: false, value: false },
  });
  if (!error) return undefined;
  return Object.values(error.constraints ?? {})[0] ?? `${error.property} is invalid`;
}

/** Skips class-transformer, which would deep-copy every payload and drop keys such as "constructor" from it. */
export function instantiate<T extends object>(type: DtoClass<T>, plain: Record<string, unknown>): T {
  const instance = new type() as unknown as Record<string, unknown>;
  for (const property of declaredProperties(type)) {
    if (plain[property] !== undefined) instance[property] = plain[property];
  }
  return instance as unknown as T;
}

export function validateBody<T extends object>(type: DtoClass<T>, body: unknown, limits?: ValidationLimits): T {
  if (!isPlainObject(body)) throw contractException('request body must be a JSON object');
  const unknown = unknownKeysProblem(type, body);
  if (unknown !== undefined) throw contractException(unknown);
  const instance = instantiate(type, body);
  const given = limits && isStorableBody(body) ? { ...limits, storableBody: true } : limits;
  const message = withValidationLimits(given, () => firstMessage(instance));
  if (message !== undefined) throw contractException(message);
  return instance;
}

export function validateQuery<T extends object>(type: DtoClass<T>, query: unknown): T {
  const given = isPlainObject(query) ? query : {};
  const unknown = unknownKeysProblem(type, given, 'query parameter');
  if (unknown !== undefined) throw contractException(unknown);
  const instance = plainToInstance(type, given);
  const message = firstMessage(instance);
  if (message !== undefined) throw contractException(message);
  return instance;
}

/** For a route that deletes and takes no query parameter: one mistaken for a filter would widen what goes. */
export class NoQueryParameters {}

export class QueryDtoPipe<T extends object> implements PipeTransform<unknown, T> {
  constructor(private readonly type: DtoClass<T>) {}

  transform(query: unknown): T {
    return validateQuery(this.type, query);
  }
}

type Check = (plain: Record<string, unknown>) => string | undefined;
/** null: the DTO has a rule only class-validator can run (a condition, nesting, a custom message). */
const compiledChecks = new WeakMap<DtoClass, Check | null>();

/** validateSync allocates per property and re-reads metadata per object: it tripled a 10,000-item push's validation. */
export function compileDtoCheck(type: DtoClass): Check {
  const check = compiledCheckOf(type);
  if (!check) throw new Error(`${type.name}: only contract rules can be compiled`);
  return check;
}

function compiledCheckOf(type: DtoClass): Check | undefined {
  let check = compiledChecks.get(type);
  if (check === undefined) {
    check = compile(type);
    compiledChecks.set(type, check);
  }
  return check ?? undefined;
}

/** Rules grouped by property in the order class-validator walks them, so the first message is the one it gives. */
function compile(type: DtoClass): Check | null {
  const storage = getMetadataStorage();
  const metadatas = storage
    .getTargetValidationMetadatas(type, '', true, false)
    // AcceptsKey only lets a key be sent: it checks nothing.
    .filter((metadata) => metadata.type !== ValidationTypes.WHITELIST);
  const compilable = (metadata: (typeof metadatas)[number]) =>
    metadata.type === ValidationTypes.CUSTOM_VALIDATION && !metadata.each && metadata.message === undefined;
  if (!metadatas.every(compilable)) return null;
  const byProperty = new Map<string, Array<{ constraints: ValidatorConstraintInterface[]; arguments: unknown[] }>>();
  for (const metadata of metadatas) {
    const constraints = storage
      .getTargetValidatorConstraints(metadata.constraintCls)
      .map((constraint) => constraint.instance);
    const rules = byProperty.get(metadata.propertyName) ?? [];
    rules.push({ constraints, arguments: metadata.constraints });
    byProperty.set(metadata.propertyName, rules);
  }
  const properties = [...byProperty].map(([property, rules]) => ({ property, rules }));
  return (plain) => {
    for (const { property, rules } of properties) {
      const value = plain[property];
      for (const rule of rules) {
        for (const constraint of rule.constraints) {
          const args: ValidationArguments = {
            targetName: type.name,
            property,
            object: plain,
            value,
            constraints: rule.arguments,
          };
          if (!constraint.validate(value, args)) return constraint.defaultMessage?.(args) ?? `${property} is invalid`;
        }
      }
    }
    return undefined;
  };
}

export function IsArrayOf(
  item: () => DtoClass,
  options: { max: number; noun: string; optional?: boolean },
): PropertyDecorator {
  return contractRule('isArrayOf', (value) => {
    if (options.optional && (value === undefined || value === null)) return undefined;
    if (!Array.isArray(value)) return 'must be an array';
    if (value.length > options.max) return `may hold at most ${options.max} ${options.noun}`;
    const type = item();
    const check = compileDtoCheck(type);
    for (let index = 0; index < value.length; index += 1) {
      const element: unknown = value[index];
      if (!isPlainObject(element)) return `[${index}] must be a JSON object`;
      const unknown = unknownKeysProblem(type, element);
      if (unknown !== undefined) return `[${index}]: ${unknown}`;
      const message = check(element);
      if (message !== undefined) return `[${index}].${message}`;
    }
    return undefined;
  });
}

export function IsObjectOf(
  type: () => DtoClass,
  options: { rest?: (undeclared: Record<string, unknown>) => Problem } = {},
): PropertyDecorator {
  return contractRule('isObjectOf', (value) => {
    if (value === undefined || value === null) return undefined;
    if (!isPlainObject(value)) return 'must be a JSON object';
    if (options.rest) {
      const problem = options.rest(undeclaredEntries(type(), value));
      if (problem !== undefined) return problem;
    } else {
      const unknown = unknownKeysProblem(type(), value);
      if (unknown !== undefined) return `: ${unknown}`;
    }
    const message = firstMessage(instantiate(type(), value));
    return message === undefined ? undefined : `.${message}`;
  });
}

/** A key named __proto__ stays data. */
export function undeclaredEntries(type: DtoClass, plain: Record<string, unknown>): Record<string, unknown> {
  const known = new Set(declaredProperties(type));
  return Object.fromEntries(Object.entries(plain).filter(([key]) => !known.has(key)));
}
