import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Queue options the pop now honours: delayedProcessing, windowBuffer and
 * priority, in columns of their own. Until now they were stored in `options`
 * and ignored; a valid value stored there moves into its column and takes
 * effect, as the queue's owner asked when setting it.
 */
export class DeliveryOptions1796400000000 implements MigrationInterface {
  name = 'DeliveryOptions1796400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE queues
        ADD COLUMN delayed_processing integer NOT NULL DEFAULT 0,
        ADD COLUMN window_buffer integer NOT NULL DEFAULT 0,
        ADD COLUMN priority integer NOT NULL DEFAULT 0`);
    for (const [option, column] of [
      ['delayedProcessing', 'delayed_processing'],
      ['windowBuffer', 'window_buffer'],
      ['priority', 'priority'],
    ]) {
      const floor = column === 'priority' ? -2147483648 : 0;
      await queryRunner.query(
        `UPDATE queues SET ${column} = (options ->> '${option}')::integer, options = options - '${option}'
          WHERE jsonb_typeof(options -> '${option}') = 'number'
            AND (options ->> '${option}')::numeric BETWEEN ${floor} AND 2147483647
            AND (options ->> '${option}')::numeric = trunc((options ->> '${option}')::numeric)`,
      );
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `UPDATE queues SET options = options || jsonb_build_object(
         'delayedProcessing', delayed_processing, 'windowBuffer', window_buffer, 'priority', priority)
        WHERE delayed_processing <> 0 OR window_buffer <> 0 OR priority <> 0`,
    );
    await queryRunner.query(
      'ALTER TABLE queues DROP COLUMN delayed_processing, DROP COLUMN window_buffer, DROP COLUMN priority',
    );
  }
}
