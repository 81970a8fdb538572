import { deploymentShare } from './deployment-share';

describe('deploymentShare', () => {
  it('gives a lone broker the whole limit', () => {
    expect(deploymentShare(500, 1)).toBe(500);
  });

  it('divides the limit equally between live brokers', () => {
    expect(deploymentShare(500, 2)).toBe(250);
    expect(deploymentShare(1000, 4)).toBe(250);
  });

  it('rounds a share up, so the brokers together allow at least the limit', () => {
    expect(deploymentShare(10, 3)).toBe(4);
    expect(deploymentShare(1000, 7)).toBe(143);
  });

  it('never rounds a small limit down to nothing', () => {
    expect(deploymentShare(1, 2)).toBe(1);
    expect(deploymentShare(3, 64)).toBe(1);
  });

  it('keeps 0 as 0', () => {
    expect(deploymentShare(0, 1)).toBe(0);
    expect(deploymentShare(0, 5)).toBe(0);
  });

  it('takes a count of 0, an unknown or a nonsense count as one broker', () => {
    expect(deploymentShare(500, 0)).toBe(500);
    expect(deploymentShare(500, undefined)).toBe(500);
    expect(deploymentShare(500, NaN)).toBe(500);
    expect(deploymentShare(500, -3)).toBe(500);
  });

  it('counts whole brokers only', () => {
    expect(deploymentShare(100, 2.5)).toBe(50);
  });
});
