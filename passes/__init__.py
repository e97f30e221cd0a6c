"""AST passes: pure functions from ast to ast, one concern per module, testable without launching anything."""
