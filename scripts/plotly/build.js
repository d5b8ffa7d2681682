// Bundles entry.js the way plotly.js bundles itself (its esbuild-config.js: the same plugins, aliases and
// defines), minified, into the dashboard's static folder. Run by build.sh; the output is committed, so neither a
// user nor CI ever runs this.
const path = require('path');
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');

const version = require('plotly.js/package.json').version;
const out = process.argv[2];   // the dashboard's static/plotly.min.js (build.sh gives it)

esbuild.build({
    entryPoints: [path.join(__dirname, 'entry.js')],
    outfile: out,
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    legalComments: 'eof',
    banner: { js: `/* plotly.js v${version} (MIT), partial bundle of nosqltune's dashboard: core (scatter), scattergl, ` +
                  'bar, parcoords; built by scripts/plotly/build.sh */' },
    plugins: [InlineCSSPlugin(), glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'info',
}).catch(() => process.exit(1));
