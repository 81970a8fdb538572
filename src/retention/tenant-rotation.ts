/** Only a claim that was not full drops the tenants it found nothing of: a full one may have skipped them. */
export class TenantRotation {
  private tenants: string[];
  private next = 0;

  constructor(
    tenants: string[],
    private readonly size: number,
  ) {
    this.tenants = [...tenants];
  }

  get done(): boolean {
    return this.tenants.length === 0;
  }

  window(): string[] {
    if (this.next >= this.tenants.length) this.next = 0;
    const window = this.tenants.slice(this.next, this.next + this.size);
    this.next += window.length;
    return window;
  }

  claimed(window: string[], found: Iterable<string>, full: boolean): void {
    if (full) return;
    const kept = new Set(found);
    const gone = new Set(window.filter((tenant) => !kept.has(tenant)));
    if (gone.size === 0) return;
    const before = this.tenants.slice(0, this.next).filter((tenant) => !gone.has(tenant)).length;
    this.tenants = this.tenants.filter((tenant) => !gone.has(tenant));
    this.next = before;
  }
}
