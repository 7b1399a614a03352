// Property tests run with a fixed seed in CI so a red run is reproducible; set FC_SEED to explore.
import fc from 'fast-check';

fc.configureGlobal({ seed: Number(process.env.FC_SEED ?? 2026) });
