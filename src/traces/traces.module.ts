import { Module } from '@nestjs/common';
import { TracesController } from './traces.controller';
import { TracesRepository } from './traces.repository';
import { TracesService } from './traces.service';

@Module({
  controllers: [TracesController],
  providers: [TracesService, TracesRepository],
})
export class TracesModule {}
