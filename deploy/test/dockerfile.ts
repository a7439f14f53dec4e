/** The services' Dockerfiles as data, for the Dockerfile and image-archive tests. */

export interface Instruction {
  op: string;
  args: string;
}

export interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

export interface Dockerfile {
  args: Record<string, string>;
  stages: Stage[];
}

/** Parses instructions (joining `\` continuations, dropping comments); enough for these files. */
export function parseDockerfile(text: string): Dockerfile {
  const lines: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    if (/^\s*#/.test(raw) && current === '') continue;
    const line = raw.replace(/\s+$/, '');
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    current += line;
    if (current.trim() !== '') lines.push(current.trim());
    current = '';
  }
  const out: Dockerfile = { args: {}, stages: [] };
  for (const line of lines) {
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const upper = op.toUpperCase();
    if (upper === 'FROM') {
      const [, from = '', name] = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args) ?? [];
      out.stages.push({ from, name, instructions: [] });
    } else if (out.stages.length === 0 && upper === 'ARG') {
      const [k, v = ''] = args.split('=', 2);
      out.args[k as string] = v;
    } else {
      out.stages.at(-1)?.instructions.push({ op: upper, args });
    }
  }
  return out;
}

export function resolve(value: string, args: Record<string, string>): string {
  return value.replace(/\$\{(\w+)\}|\$(\w+)/g, (_m, a: string | undefined, b: string | undefined) => {
    const key = (a ?? b) as string;
    const v = args[key];
    if (v === undefined) throw new Error(`undefined ARG ${key}`);
    return v;
  });
}
