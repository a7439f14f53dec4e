/** One line describing an error for logs and fail-open details, its causes included, bounded in length. */
export function describeError(e: unknown, maxLength = 300): string {
  const parts: string[] = [];
  let current: unknown = e;
  for (let depth = 0; depth < 4 && current !== undefined && current !== null; depth++) {
    if (current instanceof Error) {
      const code = (current as NodeJS.ErrnoException).code;
      parts.push(
        code !== undefined && !current.message.includes(code) ? `${current.message} (${code})` : current.message,
      );
      current = current.cause;
    } else {
      parts.push(typeof current === 'object' ? JSON.stringify(current) : String(current));
      break;
    }
  }
  const text = parts.filter((p) => p !== '').join(': ');
  return text.length > maxLength ? `${text.slice(0, maxLength)}...` : text;
}
