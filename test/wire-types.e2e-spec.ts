import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import ts from 'typescript';
import { createTestApp } from './support/test-app';

const ROOT = join(__dirname, '..');
const SOURCES = { client: join(ROOT, 'client/src/types.ts'), console: join(ROOT, 'console/src/api.ts') };
const CONSOLE_SETTINGS = join(ROOT, 'console/src/views/settings.tsx');

interface Schema {
  $ref?: string;
  minimum?: number;
  maximum?: number;
  type?: string;
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
}

interface Document {
  paths: Record<string, Record<string, { requestBody?: Media; responses: Record<string, Media> }>>;
  components: { schemas: Record<string, Schema> };
}

interface Exceptions {
  leaves: Record<string, string>;
  widens: Record<string, string>;
}

interface Media {
  content?: Record<string, { schema?: Schema }>;
}

/**
 * The hand-written wire types of the client and the console, each with what it models: a route's answer
 * (`GET /path`), its body (`POST /path body`) or a schema (`#Name`). `leaves` names the members of the wire a type
 * does not carry on purpose (by dotted path), `widens` those it makes optional where the wire always sends them, each
 * with why.
 */
const MODELLED: Array<{
  source: keyof typeof SOURCES;
  type: string;
  models: string;
  leaves?: Record<string, string>;
  widens?: Record<string, string>;
}> = [
  { source: 'client', type: 'PushItem', models: '#PushItemDto' },
  { source: 'client', type: 'PushRequest', models: 'POST /api/v1/push body' },
  { source: 'client', type: 'PushResult', models: 'POST /api/v1/push' },
  { source: 'client', type: 'Message', models: '#MessageDto' },
  { source: 'client', type: 'ClaimedPartition', models: '#ClaimedPartitionDto' },
  { source: 'client', type: 'PopResponse', models: 'GET /api/v1/pop/queue/{queue}' },
  { source: 'client', type: 'ExtendResponse', models: 'POST /api/v1/lease/{leaseId}/extend' },
  { source: 'client', type: 'Acknowledgment', models: 'POST /api/v1/ack body' },
  { source: 'client', type: 'AckBatchRequest', models: 'POST /api/v1/ack/batch body' },
  { source: 'client', type: 'AckResult', models: 'POST /api/v1/ack' },
  { source: 'client', type: 'TransactionRequest', models: 'POST /api/v1/transaction body' },
  { source: 'client', type: 'TransactionAckOperation', models: '#TransactionAckOperationDto' },
  { source: 'client', type: 'TransactionPushOperation', models: '#TransactionPushOperationDto' },
  { source: 'client', type: 'TransactionResult', models: 'POST /api/v1/transaction' },
  { source: 'client', type: 'QueueOptions', models: '#QueueOptionsDto' },
  { source: 'client', type: 'ConfigureRequest', models: 'POST /api/v1/configure body' },
  { source: 'client', type: 'ConfigureResponse', models: 'POST /api/v1/configure' },
  { source: 'client', type: 'BrokerErrorBody', models: '#ErrorResponseDto' },
  { source: 'client', type: 'TraceRequest', models: 'POST /api/v1/traces body' },
  { source: 'client', type: 'TraceResult', models: 'POST /api/v1/traces' },
  { source: 'console', type: 'WhoAmI', models: 'GET /api/v1/whoami' },
  { source: 'console', type: 'QueueList', models: 'GET /api/v1/resources/queues' },
  {
    source: 'console',
    type: 'QueueDetail',
    models: 'GET /api/v1/resources/queues/{queue}',
    leaves: {
      'consumerGroups.subscriptionFrom': "the queue page shows each group's totals, not where it started",
      'consumerGroups.partitions': "the partition table shows the partitions' own counts, not each group's cursor",
    },
  },
  { source: 'console', type: 'GroupSummary', models: 'GET /api/v1/consumer-groups' },
  { source: 'console', type: 'LeaseList', models: 'GET /api/v1/resources/queues/{queue}/leases' },
  { source: 'console', type: 'MessagePage', models: 'GET /api/v1/messages' },
  { source: 'console', type: 'MessageDetail', models: 'GET /api/v1/messages/{partitionId}/{transactionId}' },
  { source: 'console', type: 'MessageTrace', models: '#MessageTraceDto' },
  { source: 'console', type: 'DeadLetterPage', models: 'GET /api/v1/dlq' },
  { source: 'console', type: 'QuotaUsage', models: 'GET /api/v1/resources/quotas' },
  { source: 'console', type: 'MaintenanceState', models: 'GET /api/v1/system/maintenance' },
  {
    source: 'console',
    type: 'History',
    models: 'GET /api/v1/resources/queues/{queue}/history',
    leaves: { queue: 'the chart knows which queue it asked for' },
    widens: { 'points.lag': "one type serves the tenant's history too, whose points have no lag" },
  },
  { source: 'console', type: 'History', models: 'GET /api/v1/resources/history', widens: { 'points.lag': 'ditto' } },
];

/** Exported interfaces that are not a JSON shape of the wire, with why. */
const NOT_WIRE: Record<string, string> = {
  LeaseholdClientOptions: "the client's own settings",
  RequestOptions: 'per call settings of the client',
  PopOptions: 'query parameters, not a JSON body',
  AckBatchOptions: 'per call settings of the client',
  ExtendResult: 'ExtendResponse with what the client reads from the answer headers',
  TraceOptions: "per call settings of the client: TraceRequest's optional members",
};

function jsonSchema(media: Media | undefined): Schema | undefined {
  return media?.content?.['application/json']?.schema;
}

/** The schema a `models` entry names, as a component reference. */
function modelled(document: Document, models: string): Schema {
  if (models.startsWith('#')) return { $ref: `#/components/schemas/${models.slice(1)}` };
  const [method, path, part] = models.split(' ');
  const operation = document.paths[path]?.[method.toLowerCase()];
  if (!operation) throw new Error(`${models}: no such route in /docs-json`);
  const schema =
    part === 'body'
      ? jsonSchema(operation.requestBody)
      : jsonSchema(operation.responses['200'] ?? operation.responses['201']);
  if (!schema) throw new Error(`${models}: the route documents no JSON schema`);
  return schema.items ?? schema;
}

class WireTypes {
  private readonly checker: ts.TypeChecker;
  private readonly files: Record<string, ts.SourceFile>;
  /** Interfaces compared so far, nested ones included. */
  readonly compared = new Set<string>();

  constructor() {
    const program = ts.createProgram(Object.values(SOURCES), {
      strict: true,
      noEmit: true,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    });
    this.checker = program.getTypeChecker();
    this.files = Object.fromEntries(
      Object.entries(SOURCES).map(([source, file]) => [source, program.getSourceFile(file)!]),
    );
  }

  declared(source: string, name: string): ts.Type {
    const declaration = this.files[source].statements.find(
      (statement): statement is ts.InterfaceDeclaration | ts.TypeAliasDeclaration =>
        (ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement)) && statement.name.text === name,
    );
    if (!declaration) throw new Error(`${source} declares no type ${name}`);
    return this.checker.getTypeAtLocation(declaration.name);
  }

  /** Where the keys or their optionality differ from the schema, nested objects included. */
  differences(type: ts.Type, schema: Schema, document: Document, exceptions: Exceptions, at = ''): string[] {
    const component = schema.$ref ? document.components.schemas[schema.$ref.split('/').pop()!] : schema;
    if (!component?.properties) return [];
    if (type.symbol) this.compared.add(type.symbol.name);
    const required = new Set(component.required ?? []);
    const members = new Map(this.checker.getPropertiesOfType(type).map((member) => [member.name, member]));
    const problems: string[] = [];
    for (const [key, property] of Object.entries(component.properties)) {
      const path = `${at}${key}`;
      const member = members.get(key);
      if (!member) {
        if (!(path in exceptions.leaves)) problems.push(`${path} is on the wire and missing from the type`);
        continue;
      }
      const optional = (member.flags & ts.SymbolFlags.Optional) !== 0;
      if (optional === required.has(key) && !(optional && path in exceptions.widens)) {
        problems.push(`${path} is ${optional ? 'optional' : 'required'} in the type, not on the wire`);
      }
      const nested = this.objectOf(this.checker.getTypeOfSymbol(member));
      const target = property.items ?? property;
      if (nested && target.$ref) problems.push(...this.differences(nested, target, document, exceptions, `${path}.`));
    }
    for (const [key, member] of members) {
      const widened = (member.flags & ts.SymbolFlags.Optional) !== 0 && `${at}${key}` in exceptions.widens;
      if (!(key in component.properties) && !widened) problems.push(`${at}${key} is in the type and not on the wire`);
    }
    return problems;
  }

  exportedInterfaces(): string[] {
    return Object.values(this.files).flatMap((file) =>
      file.statements
        .filter(ts.isInterfaceDeclaration)
        .filter((statement) => statement.modifiers?.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword))
        .map((statement) => statement.name.text),
    );
  }

  /** The object type a member holds, directly or as the elements of an array; undefined for anything else. */
  private objectOf(type: ts.Type): ts.Type | undefined {
    let inner = this.checker.getNonNullableType(type);
    if (this.checker.isArrayType(inner)) inner = this.checker.getTypeArguments(inner as ts.TypeReference)[0];
    if (inner.isUnion() || !(inner.flags & ts.TypeFlags.Object)) return undefined;
    return this.checker.getPropertiesOfType(inner).length > 0 ? inner : undefined;
  }
}

/** The number a constant expression of `file` stands for: a literal, a negation, or a constant declared there. */
function numberOf(expression: ts.Expression, file: ts.SourceFile): number {
  if (ts.isNumericLiteral(expression)) return Number(expression.text.replace(/_/g, ''));
  if (ts.isPrefixUnaryExpression(expression) && expression.operator === ts.SyntaxKind.MinusToken) {
    return -numberOf(expression.operand, file);
  }
  if (ts.isIdentifier(expression)) return numberOf(constant(file, expression.text), file);
  throw new Error(`not a constant number: ${expression.getText(file)}`);
}

function constant(file: ts.SourceFile, name: string): ts.Expression {
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const declaration of statement.declarationList.declarations) {
      if (ts.isIdentifier(declaration.name) && declaration.name.text === name && declaration.initializer) {
        const initializer = declaration.initializer;
        return ts.isAsExpression(initializer) ? initializer.expression : initializer;
      }
    }
  }
  throw new Error(`${file.fileName} declares no constant ${name}`);
}

/** The settings page's editable options, each with the bounds it checks before sending. */
function consoleBounds(): Array<{ key: string; min: number; max: number }> {
  const file = ts.createSourceFile(
    CONSOLE_SETTINGS,
    readFileSync(CONSOLE_SETTINGS, 'utf8'),
    ts.ScriptTarget.ES2022,
    true,
  );
  const editable = constant(file, 'EDITABLE');
  if (!ts.isArrayLiteralExpression(editable)) throw new Error('EDITABLE is not an array literal');
  return editable.elements.map((element) => {
    const fields = new Map(
      (element as ts.ObjectLiteralExpression).properties
        .filter(ts.isPropertyAssignment)
        .map((property) => [property.name.getText(file), property.initializer]),
    );
    return {
      key: (fields.get('key') as ts.StringLiteral).text,
      min: numberOf(fields.get('min')!, file),
      max: numberOf(fields.get('max')!, file),
    };
  });
}

describe("the client's and the console's wire types", () => {
  let app: NestExpressApplication;
  let document: Document;
  const types = new WireTypes();

  beforeAll(async () => {
    app = await createTestApp();
    document = (await request(app.getHttpServer()).get('/docs-json').expect(200)).body;
  });

  afterAll(async () => {
    await app.close();
  });

  it.each(MODELLED.map((entry) => [`${entry.source} ${entry.type}`, entry.models, entry]))(
    '%s has the keys and optionality of %s in /docs-json',
    (_name, _models, entry) => {
      const schema = modelled(document, entry.models);
      const problems = types.differences(types.declared(entry.source, entry.type), schema, document, {
        leaves: entry.leaves ?? {},
        widens: entry.widens ?? {},
      });

      expect(problems).toEqual([]);
    },
  );

  it("bounds each option the console's settings page edits as configure's schema does", () => {
    const options = document.components.schemas.QueueOptionsDto.properties!;

    for (const { key, min, max } of consoleBounds()) {
      expect({ key, min, max }).toEqual({ key, min: options[key]?.minimum, max: options[key]?.maximum });
    }
  });

  it('compares every exported interface of both, directly or inside another, unless it is not a wire shape', () => {
    for (const entry of MODELLED) {
      types.differences(types.declared(entry.source, entry.type), modelled(document, entry.models), document, {
        leaves: entry.leaves ?? {},
        widens: entry.widens ?? {},
      });
    }

    const unchecked = types.exportedInterfaces().filter((name) => !types.compared.has(name) && !(name in NOT_WIRE));
    expect(unchecked).toEqual([]);
  });
});
