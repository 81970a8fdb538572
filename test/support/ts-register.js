'use strict';
// Lets a child process run the TypeScript sources as they are (the brokers
// the process-level fault tests start and kill): each file is transpiled on
// require with the project's compiler options, without a type check, which
// `npm test` runs separately.
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const ts = require('typescript');

const root = join(__dirname, '..', '..');
const { config } = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
const { options } = ts.convertCompilerOptionsFromJson(config.compilerOptions, root);
const compilerOptions = { ...options, sourceMap: false, inlineSourceMap: true, isolatedModules: true };

require.extensions['.ts'] = (module, filename) => {
  const { outputText } = ts.transpileModule(readFileSync(filename, 'utf8'), { compilerOptions, fileName: filename });
  module._compile(outputText, filename);
};
