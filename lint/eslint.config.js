// ESLint over the whole tree: typescript-eslint's strict type-checked rules, less those that fight how this code is
// written on purpose (each says why). Layout is Prettier's (../.prettierrc.json), not ESLint's.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const TESTS = ['**/*.test.ts', '**/testing/**', 'e2e/**', 'bench/**', 'hack/**'];

export default tseslint.config(
  { ignores: ['**/node_modules/**', 'dist/**', 'out/**', 'bench/runs/**', '**/*.cjs', '**/*.js'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: new URL('..', import.meta.url).pathname },
    },
    rules: {
      // Nested conditionals read as an if/else or a lookup table.
      'no-nested-ternary': 'error',
      // Messages interpolate counts and flags on purpose.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // `(x) => void f(x)` and `() => set.add(x)` are the callbacks' own idiom.
      '@typescript-eslint/no-confusing-void-expression': [
        'error',
        { ignoreArrowShorthand: true, ignoreVoidOperator: true },
      ],
      // noUncheckedIndexedAccess is on: `list[i]!` after a bounds check is the honest way to say it.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Objects from the API server are `unknown` read field by field (api/capi/fields.ts); the few `any` left are
      // client-node's own types.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      // Defensive checks on values a user could have written (status, annotations) look "unnecessary" to the types.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // Handlers hand back what they call (`(req, res) => res.end()`), as Node's own examples do; and this rule's fix
      // fights no-meaningless-void-operator's.
      '@typescript-eslint/no-confusing-void-expression': 'off',
      // Errors are passed on as they came (loggers and the runtime take `unknown`); a rethrown error names its cause
      // in its message.
      '@typescript-eslint/use-unknown-in-catch-callback-variable': 'off',
      'preserve-caught-error': 'off',
      // The apiserver's JSON is `Json` (any) at the client boundary, read field by field (api/capi/fields.ts); winston's
      // and client-node's classes are typed loosely; messages echo values a user wrote, whatever they are.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
      // Optional status and flag fields are removed by key on purpose (observe.ts assign), and a closure over `this`
      // in event handlers reads plainer than a bound method; validators are looked up as plain functions.
      '@typescript-eslint/no-dynamic-delete': 'off',
      '@typescript-eslint/no-this-alias': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/no-unnecessary-type-parameters': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: TESTS,
    rules: {
      // Tests build raw API objects and fakes: `any`, async fakes with no await, chai's expression assertions.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-unused-expressions': 'off',
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/no-dynamic-delete': 'off',
      '@typescript-eslint/no-meaningless-void-operator': 'off',
      '@typescript-eslint/use-unknown-in-catch-callback-variable': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
      // Product code has none; test tables and fixtures keep their compact one-line choices.
      'no-nested-ternary': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      '@typescript-eslint/no-misused-spread': 'off',
      'no-control-regex': 'off',
    },
  },
);
