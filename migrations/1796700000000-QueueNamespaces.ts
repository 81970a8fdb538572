import { MigrationInterface, QueryRunner } from 'typeorm';

/** A queue's namespace and task: what a discovery pop and the resources listings group queues by. */
export class QueueNamespaces1796700000000 implements MigrationInterface {
  name = 'QueueNamespaces1796700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE queues ADD COLUMN namespace text, ADD COLUMN task text');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE queues DROP COLUMN namespace, DROP COLUMN task');
  }
}
