'use strict';
// The package's version is hilo.control's default_version.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const hilo = require('..');

test('version is the extension\'s', () => {
  const control = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'hilo.control'), 'utf8');
  assert.equal(hilo.version, /^default_version = '([^']+)'/m.exec(control)[1]);
});
