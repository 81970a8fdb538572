import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { PassportModule } from '@nestjs/passport';
import { AccessGuard } from './access.guard';
import { JwtStrategy } from './jwt.strategy';

@Module({
  imports: [PassportModule.register({ session: false })],
  providers: [JwtStrategy, { provide: APP_GUARD, useClass: AccessGuard }],
})
export class AuthModule {}
