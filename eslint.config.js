// Lint configuration: typescript-eslint's recommended rules over every package,
// test, benchmark and script. Kept non-type-aware so that `npm test` stays fast;
// `tsc --noEmit` (npm run typecheck) does the type-level checking.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "packages/server/static/**", "**/.data/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        console: "readonly", process: "readonly", Buffer: "readonly", setTimeout: "readonly",
        clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly", URL: "readonly",
        fetch: "readonly", performance: "readonly", structuredClone: "readonly", AbortController: "readonly",
        TextEncoder: "readonly", TextDecoder: "readonly", queueMicrotask: "readonly", setImmediate: "readonly",
        document: "readonly", window: "readonly", localStorage: "readonly", HTMLElement: "readonly",
        navigator: "readonly", location: "readonly", history: "readonly", Event: "readonly", KeyboardEvent: "readonly",
      },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "error",
      "no-constant-condition": ["error", { checkLoops: false }],
      "prefer-const": "error",
      eqeqeq: ["error", "always", { null: "ignore" }],
    },
  },
);
