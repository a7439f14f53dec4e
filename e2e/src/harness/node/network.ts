/**
 * The addresses of one real node, derived from its slot (pure). Every range is private to the run:
 * the node's network namespace is joined to the host by one veth pair, and the host routes only the
 * node's Pod and Service ranges into it. Nothing is routed toward the host's default gateway.
 *
 *   host  kpin<slot>  10.<s>.255.1/24  ── veth ──  eth0 10.<s>.255.2/24  node namespace
 *                                                  cni0 10.<s>.0.1/24    Pods 10.<s>.0.0/24
 *   Services 10.<s>.128.0/24 (the `kubernetes` Service: 10.<s>.128.1, DNAT'd by kube-proxy)
 *
 * with s = FIRST_OCTET + slot. The slot is claimed by creating the host's veth (link names are
 * unique, so two runs never share one).
 */
export const MAX_SLOTS = 32;
const FIRST_OCTET = 200;

export interface NodeNetwork {
  slot: number;
  /** The host's end of the veth pair (its name is the slot's lock). */
  hostLink: string;
  /** The node namespace's end. */
  nodeLink: string;
  /** The host's address on the veth: where the API server binds and advertises. */
  hostIp: string;
  /** The node's address (kubelet's --node-ip, InternalIP). */
  nodeIp: string;
  /** Prefix length of the veth subnet. */
  linkPrefix: number;
  podCidr: string;
  /** The bridge's address in the node namespace: the Pods' default gateway. */
  podGateway: string;
  serviceCidr: string;
  /** First address of serviceCidr: the `kubernetes` Service's ClusterIP. */
  kubernetesServiceIp: string;
}

export function nodeNetwork(slot: number): NodeNetwork {
  if (!Number.isInteger(slot) || slot < 0 || slot >= MAX_SLOTS) {
    throw new Error(`node network slot ${slot} outside 0..${MAX_SLOTS - 1}`);
  }
  const s = `10.${FIRST_OCTET + slot}`;
  return {
    slot,
    hostLink: `kpin${slot}`,
    nodeLink: 'eth0',
    hostIp: `${s}.255.1`,
    nodeIp: `${s}.255.2`,
    linkPrefix: 24,
    podCidr: `${s}.0.0/24`,
    podGateway: `${s}.0.1`,
    serviceCidr: `${s}.128.0/24`,
    kubernetesServiceIp: `${s}.128.1`,
  };
}

/** The /16 a slot's ranges live in: a host route inside it (from anyone else) makes the slot unusable. */
export function slotSupernet(slot: number): string {
  return `10.${FIRST_OCTET + slot}.0.0/16`;
}

/** Whether IPv4 `ip` lies in `cidr`. */
export function ipInCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  const prefix = Number(bits);
  const toInt = (a: string): number => a.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
  if (base === undefined || !Number.isInteger(prefix)) throw new Error(`not an IPv4 CIDR: ${cidr}`);
  const size = 2 ** (32 - prefix);
  return Math.floor(toInt(ip) / size) === Math.floor(toInt(base) / size);
}

/** Whether two IPv4 CIDRs overlap. */
export function cidrsOverlap(a: string, b: string): boolean {
  const [baseA] = a.split('/');
  const [baseB] = b.split('/');
  return ipInCidr(baseA as string, b) || ipInCidr(baseB as string, a);
}
