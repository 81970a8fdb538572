import { BadRequestException, ConflictException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { QueryFailedError } from '../database/query-failed-error';
import { BrokerRegistry } from '../cluster/broker-registry';
import { zonedTimestamp } from '../common/contract-validators';
import { JsonText } from '../common/json-text';
import { isUuid, uuidv7 } from '../common/uuid';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { TransactionRunner } from '../database/transaction-runner';
import { TraceCommand, TraceCreatedDto, TRACES_PER_MESSAGE_MAX } from './dto/trace-request.dto';
import { TraceNamesDto, TraceNamesQueryDto, TracesByNameQueryDto } from './dto/traces.dto';
import { MESSAGE_TRACE_KEYS, NAMED_TRACE_KEYS, traceJson } from './trace-shape';
import { TracesRepository } from './traces.repository';

/** The page's own keys, outside its traces. */
const PAGE_ENVELOPE_BYTES = 1_024;
const NOT_A_CURSOR = 'after is not a page cursor';
/** SQLSTATE foreign_key_violation: the message went between the statement's look and its insert. */
const FOREIGN_KEY_VIOLATION = '23503';

@Injectable()
export class TracesService {
  private readonly pageBudget: number;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly traces: TracesRepository,
    private readonly brokers: BrokerRegistry,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.pageBudget = config.limits.responseMaxBytes - PAGE_ENVELOPE_BYTES;
  }

  /** The message must exist in the caller's tenant (Queen looks it up too); its traces go when it goes. */
  async record(tenantId: string, command: TraceCommand): Promise<TraceCreatedDto> {
    const traceId = uuidv7();
    const trace = { ...command, id: traceId, workerId: this.brokers.brokerId };
    const outcome = await this.transactions
      .runOne(tenantId, this.traces.record(tenantId, trace, TRACES_PER_MESSAGE_MAX))
      .catch((error: unknown) => {
        if (
          error instanceof QueryFailedError &&
          (error.driverError as { code?: string }).code === FOREIGN_KEY_VIOLATION
        ) {
          return 'message not found' as const;
        }
        throw error;
      });
    if (outcome === 'message not found') throw new NotFoundException({ error: 'message not found' });
    if (outcome === 'message full') {
      throw new ConflictException({ error: `a message keeps at most ${TRACES_PER_MESSAGE_MAX} traces` });
    }
    return { success: true, traceId };
  }

  /** An unknown message has no traces: the same empty answer, as Queen gives. */
  ofMessage(tenantId: string, partitionId: string, transactionId: string): Promise<JsonText> {
    return this.transactions.read(tenantId, async (reader) => {
      const traces = await reader.last(this.traces.ofMessage(tenantId, partitionId, transactionId));
      return new JsonText(`{"traces":[${traces.map((trace) => traceJson(trace, MESSAGE_TRACE_KEYS)).join(',')}]}`);
    });
  }

  /** Page and total from one snapshot. */
  byName(tenantId: string, name: string, query: TracesByNameQueryDto): Promise<JsonText> {
    const after = query.after === undefined ? undefined : decodeCursor(query.after);
    const page = { limit: query.limit, offset: query.offset, after };
    return this.transactions.read(tenantId, async (reader) => {
      const { traces, more } = await reader.run(this.traces.byName(tenantId, name, page, this.pageBudget));
      const total = await reader.last(this.traces.nameTotal(tenantId, name));
      const last = traces.at(-1);
      const next = more && last ? encodeCursor(last.createdAt, last.id) : null;
      const pagination = JSON.stringify({ limit: query.limit, offset: query.offset, next });
      const entries = traces.map((trace) => traceJson(trace, NAMED_TRACE_KEYS));
      return new JsonText(`{"traces":[${entries.join(',')}],"total":${total},"pagination":${pagination}}`);
    });
  }

  names(tenantId: string, { limit, offset }: TraceNamesQueryDto): Promise<TraceNamesDto> {
    return this.transactions.read(tenantId, async (reader) => {
      const names = await reader.run(this.traces.names(tenantId, limit, offset));
      const total = await reader.last(this.traces.nameCount(tenantId));
      return {
        trace_names: names.map((name) => ({
          trace_name: name.name,
          trace_count: name.traceCount,
          message_count: name.messageCount,
          last_seen: name.lastSeen,
        })),
        total,
        pagination: { limit, offset },
      };
    });
  }
}

function encodeCursor(createdAt: string, id: string): string {
  return Buffer.from(`${createdAt}|${id}`).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: string; id: string } {
  const [createdAt, id, ...rest] = Buffer.from(cursor, 'base64url').toString().split('|');
  if (rest.length > 0 || zonedTimestamp(createdAt) === undefined || !isUuid(id)) {
    throw new BadRequestException({ error: NOT_A_CURSOR });
  }
  return { createdAt, id };
}
