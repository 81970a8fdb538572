import { Global, Module } from '@nestjs/common';
import { EncryptionKeysRepository } from './encryption-keys.repository';
import { EncryptionStartupCheck } from './encryption-startup-check';
import { PayloadCipher } from './payload-cipher';
import { Reencryption } from './reencryption';

@Global()
@Module({
  providers: [PayloadCipher, EncryptionKeysRepository, EncryptionStartupCheck, Reencryption],
  exports: [PayloadCipher, EncryptionKeysRepository, Reencryption],
})
export class EncryptionModule {}
