import type { IncomingHttpHeaders } from 'node:http';
import { refusedAsCrossSite } from './cross-site';

const HOST = 'broker.example:6632';
const ALLOWED = new Set(['https://app.example.com']);

describe('refusedAsCrossSite', () => {
  const verdict = (headers: IncomingHttpHeaders) => refusedAsCrossSite({ host: HOST, ...headers }, ALLOWED);

  it.each<[string, IncomingHttpHeaders]>([
    ['no browser header at all (curl, SDKs, probes)', {}],
    ['Sec-Fetch-Site same-origin', { 'sec-fetch-site': 'same-origin', origin: 'http://broker.example:6632' }],
    ['Sec-Fetch-Site none (typed into the address bar)', { 'sec-fetch-site': 'none' }],
    [
      'an allow-listed origin, however the browser classes it',
      { 'sec-fetch-site': 'cross-site', origin: 'https://app.example.com' },
    ],
    ['an Origin naming the Host, from a browser without Sec-Fetch-Site', { origin: 'http://broker.example:6632' }],
    ['an Origin naming the Host in other case', { origin: 'http://Broker.Example:6632' }],
    ['a Referer on the Host', { referer: 'http://broker.example:6632/console/' }],
    ['a Referer on an allow-listed origin', { referer: 'https://app.example.com/page' }],
  ])('lets through %s', (_, headers) => {
    expect(verdict(headers)).toBe(false);
  });

  it.each<[string, IncomingHttpHeaders]>([
    ['Sec-Fetch-Site cross-site without an Origin (an <img>)', { 'sec-fetch-site': 'cross-site' }],
    [
      'Sec-Fetch-Site cross-site from an origin not listed',
      { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
    ],
    [
      'Sec-Fetch-Site same-site (a sibling subdomain)',
      { 'sec-fetch-site': 'same-site', origin: 'https://x.broker.example' },
    ],
    ['an unknown Sec-Fetch-Site value', { 'sec-fetch-site': 'other' }],
    ['an Origin naming another host', { origin: 'http://evil.example' }],
    ['an Origin naming the host on another port', { origin: 'http://broker.example:8080' }],
    ['the opaque origin null (sandboxed frames, data: pages)', { origin: 'null' }],
    ['an Origin that is not a URL', { origin: 'not a url' }],
    ['an Origin when the request has no Host', { origin: 'http://broker.example:6632', host: undefined }],
    ['the opaque origin when the request has no Host', { origin: 'null', host: undefined }],
    ['a Referer from another host, with neither of the others', { referer: 'http://evil.example/attack.html' }],
  ])('refuses %s', (_, headers) => {
    expect(verdict(headers)).toBe(true);
  });
});
