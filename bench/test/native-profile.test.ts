import { describe, expect, it } from '@jest/globals';
import { bucketOf, bucketsOfPerfScript, type Frame } from '../src/native-profile.js';

const NODE = '/opt/node/bin/node';
const K = '[kernel.kallsyms]';
const f = (sym: string, dso = NODE): Frame => ({ sym, dso });

/** The write path of an answer, from node down to the kernel (leaf first, as perf prints it). */
const WRITE_PATH = [
  f('tcp_sendmsg', K),
  f('sock_write_iter', K),
  f('__GI___libc_write', '/usr/lib/x86_64-linux-gnu/libc.so.6'),
  f('node::crypto::TLSWrap::EncOut'),
  f('uv_run'),
];

describe('bucketOf', () => {
  it("puts kernel time under sock_def_readable into the load generator's wake-up, other kernel time apart", () => {
    const wake = [
      f('_raw_spin_unlock_irqrestore', K),
      f('sock_def_readable', K),
      f('tcp_data_queue', K),
      ...WRITE_PATH,
    ];
    expect(bucketOf(wake)).toBe('kernel: waking the load generator (loopback socket delivery)');
    expect(bucketOf(WRITE_PATH)).toBe('kernel: TCP/IP, system calls, scheduler');
    expect(bucketOf([f('_raw_spin_unlock_irqrestore', K), f('futex_wake', K)])).toBe(
      'kernel: TCP/IP, system calls, scheduler',
    );
  });

  it('names OpenSSL, GC, the compilers, JSON, hidden-class changes and llhttp by the chain', () => {
    expect(bucketOf([f('ossl_aes_gcm_encrypt_avx512'), f('node::crypto::TLSWrap::EncOut')])).toBe(
      'TLS record encryption and decryption (OpenSSL)',
    );
    expect(bucketOf([f('v8::internal::Scavenger::ScavengeObject<…>'), f('v8::internal::Heap::Scavenge')])).toBe(
      'garbage collection',
    );
    expect(bucketOf([f('v8::internal::compiler::ObjectRef::IsMap'), f('v8::internal::compiler::Pipeline')])).toBe(
      'V8 compilers (background threads)',
    );
    // A malloc inside the JSON parser is the parser's.
    expect(
      bucketOf([
        f('malloc', '/usr/lib/x86_64-linux-gnu/libc.so.6'),
        f('v8::internal::JsonParser<unsigned char>::Parse'),
      ]),
    ).toBe('JSON.parse');
    expect(bucketOf([f('v8::internal::JsonStringifier::SerializeString<false>')])).toBe('JSON.stringify');
    expect(bucketOf([f('v8::internal::MapUpdater::FindTargetMap'), f('v8::internal::JSObject::SetPrototype')])).toBe(
      'hidden-class changes (V8 MapUpdater, setPrototypeOf)',
    );
    expect(bucketOf([f('llhttp__internal__run'), f('node::http_parser::Parser::Execute')])).toBe(
      'HTTP parser (llhttp)',
    );
  });

  it('puts unsymbolized JIT code, libc and the rest of node in their own buckets', () => {
    expect(bucketOf([f('[unknown]', '[unknown]'), f('Builtins_JSEntry')])).toBe('JavaScript (JIT-compiled code)');
    expect(bucketOf([f('JS:*answer app.js:79', '/tmp/perf-123.map')])).toBe('JavaScript (JIT-compiled code)');
    expect(bucketOf([f('__memmove_avx512_unaligned_erms', '/usr/lib/x86_64-linux-gnu/libc.so.6')])).toBe(
      'malloc, free, memcpy (libc)',
    );
    expect(bucketOf([f('Builtins_KeyedLoadIC_Megamorphic')])).toBe('V8 and Node.js runtime, builtins, interpreter');
    expect(bucketOf([])).toBe('JavaScript (JIT-compiled code)');
  });
});

describe('bucketsOfPerfScript', () => {
  it('sums each sample’s period into the bucket of its call chain (perf script -F period,ip,sym,dso)', () => {
    const text = [
      '    500000 ',
      `\t    ffffffff81000000 _raw_spin_unlock_irqrestore (${K})`,
      `\t    ffffffff81000100 sock_def_readable (${K})`,
      `\t         1638b35 uv_run (${NODE})`,
      '',
      '    250000 ',
      `\t         2401a66 v8::internal::JsonParser<unsigned char>::ScanJsonString (${NODE})`,
      `\t         2409787 v8::internal::JsonParser<unsigned char>::ParseJsonObject (${NODE})`,
      '',
      '    500000 ',
      `\t         2401a66 v8::internal::JsonParser<unsigned char>::ScanJsonString (${NODE})`,
      '',
      '    100 ',
      '',
    ].join('\n');
    expect(Object.fromEntries(bucketsOfPerfScript(text))).toEqual({
      'kernel: waking the load generator (loopback socket delivery)': 500_000,
      'JSON.parse': 750_000,
    });
  });
});
