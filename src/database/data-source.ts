import { DataSource } from 'typeorm';
import { loadEnvFile } from '../config/env-file';
import { loadConfig } from '../config/load-config';
import { buildDataSourceOptions } from './data-source-options';

/** For the TypeORM CLI; the embedded database migrates itself when the broker starts. */
loadEnvFile();
const config = loadConfig();
if (!config.database.url) {
  throw new Error('DATABASE_URL must be set to run migrations from the CLI');
}

export default new DataSource(buildDataSourceOptions(config.database, config.database.url));
