/**
 * Minimal typings of the parts of `better-sqlite3` 12 that src/server uses (the package ships
 * no types and `@types/better-sqlite3` is not a dependency). Delete this file if
 * `@types/better-sqlite3` is ever added.
 */
declare module 'better-sqlite3' {
  namespace Database {
    /** Result of `Statement.run`. */
    interface RunResult {
      changes: number;
      lastInsertRowid: number | bigint;
    }
    /** A prepared statement. */
    interface Statement<P extends unknown[] = unknown[], R = unknown> {
      run(...params: P): RunResult;
      get(...params: P): R | undefined;
      all(...params: P): R[];
      iterate(...params: P): IterableIterator<R>;
    }
    /** Constructor options. */
    interface Options {
      readonly?: boolean;
      fileMustExist?: boolean;
      timeout?: number;
    }
    /** A connection. */
    interface Connection {
      readonly open: boolean;
      readonly inTransaction: boolean;
      prepare<P extends unknown[] = unknown[], R = unknown>(sql: string): Statement<P, R>;
      exec(sql: string): this;
      pragma(source: string, options?: { simple?: boolean }): unknown;
      transaction<F extends (...args: never[]) => unknown>(fn: F): F;
      close(): this;
    }
  }
  /** Open (or create) a database file. */
  const Database: new (filename: string, options?: Database.Options) => Database.Connection;
  export = Database;
}
